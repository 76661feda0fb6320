"""Test-time-training inner models of the ViT^3 block: a SwiGLU model per
head and a depthwise 3x3 conv head."""

from .dispatch import ttt_dwconv, ttt_swiglu
from .naive import (
    TTT_INNER_SCALE,
    dwconv_inner_grad,
    swiglu_inner_grads,
    ttt_dwconv_reference,
    ttt_swiglu_reference,
)

__all__ = [
    'TTT_INNER_SCALE',
    'dwconv_inner_grad',
    'swiglu_inner_grads',
    'ttt_dwconv',
    'ttt_dwconv_reference',
    'ttt_swiglu',
    'ttt_swiglu_reference',
]
