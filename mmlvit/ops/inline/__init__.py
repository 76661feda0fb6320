"""InLine attention (injective linear attention)."""

from .dispatch import inline_attention, inline_attention_map

__all__ = ['inline_attention', 'inline_attention_map']
