from .attention_distiller import AttentionDistiller
from .recorder import AttentionRecording, attention_modules

__all__ = ['AttentionDistiller', 'AttentionRecording', 'attention_modules']
