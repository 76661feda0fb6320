"""Multi-head linear attention (MHLA): block-mixed ReLU attention."""

from .dispatch import (
    mhla_attention,
    mhla_attention_map,
    mhla_block_index,
    mhla_linear_mixing,
)

__all__ = [
    'mhla_attention',
    'mhla_attention_map',
    'mhla_block_index',
    'mhla_linear_mixing',
]
