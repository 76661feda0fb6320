"""Multi-head linear attention (MHLA): block-mixed ReLU attention."""

from .blocks import mhla_block_index, mhla_linear_mixing
from .dispatch import mhla_attention
from .naive import MHLA_EPS, mhla_attention_map
from .reference import mhla_attention_reference

__all__ = [
    'MHLA_EPS',
    'mhla_attention',
    'mhla_attention_map',
    'mhla_attention_reference',
    'mhla_block_index',
    'mhla_linear_mixing',
]
