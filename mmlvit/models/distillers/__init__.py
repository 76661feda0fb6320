from .attention_distiller import AttentionDistiller
from .dense_distiller import BackboneTeacher, DenseAttentionDistiller
from .recorder import AttentionRecording, attention_modules

__all__ = [
    'AttentionDistiller',
    'AttentionRecording',
    'BackboneTeacher',
    'DenseAttentionDistiller',
    'attention_modules',
]
