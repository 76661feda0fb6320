"""InLine attention (injective linear attention)."""

from .dispatch import inline_attention
from .naive import inline_attention_map
from .reference import inline_attention_reference

__all__ = [
    'inline_attention',
    'inline_attention_map',
    'inline_attention_reference',
]
