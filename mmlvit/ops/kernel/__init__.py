"""Non-causal phi-kernel linear attention (ELU+1 / ReLU / identity)."""

from .dispatch import (
    feature_map,
    kernel_attention_map,
    kernel_linear_attention,
)

__all__ = ['feature_map', 'kernel_attention_map', 'kernel_linear_attention']
