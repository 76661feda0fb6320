"""Non-causal phi-kernel linear attention (ELU+1 / ReLU / identity)."""

from .dispatch import kernel_linear_attention
from .naive import feature_map, kernel_attention_map
from .reference import kernel_linear_attention_reference
from .rope import kernel_attention_map_rope, kernel_linear_attention_rope

__all__ = [
    'feature_map',
    'kernel_attention_map',
    'kernel_attention_map_rope',
    'kernel_linear_attention',
    'kernel_linear_attention_reference',
    'kernel_linear_attention_rope',
]
