"""Fused Triton kernels of the non-causal linear attentions (kernel
attention with ELU+1 / ReLU / identity feature maps, InLine, MHLA's
block-mixed attention), forward and backward, and the choice between them
and the PyTorch references.

Triton is imported only when a fused kernel runs, so the package imports
where Triton does not.
"""

from .dispatch import BACKENDS, check_backend, use_fused

__all__ = ['BACKENDS', 'check_backend', 'use_fused']
