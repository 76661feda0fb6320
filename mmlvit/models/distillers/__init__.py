from .attention_distiller import AttentionDistiller
from .dense_distiller import BackboneTeacher, DenseAttentionDistiller
from .recorder import PROBES, AttentionRecording, Probe, attention_modules
from .student_state import keep_student_only
from .teacher import load_teacher_weights

__all__ = [
    'PROBES',
    'AttentionDistiller',
    'AttentionRecording',
    'BackboneTeacher',
    'DenseAttentionDistiller',
    'Probe',
    'attention_modules',
    'keep_student_only',
    'load_teacher_weights',
]
