"""Which path an MHLA call takes: the fused Triton kernels
(:mod:`mmlvit.ops.common.linear_function`) or the PyTorch reference."""

from torch import Tensor

from ..common.dispatch import use_fused
from .blocks import _blocks_per_side
from .naive import MHLA_EPS
from .reference import mhla_attention_reference


def mhla_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mixing: Tensor,
    hw_shape: tuple[int, int],
    backend: str = 'auto',
) -> Tensor:
    """Block-mixed ReLU linear attention in O(N) time and memory.

    Two paths compute it: fused Triton kernels
    (:func:`.function.fused_mhla_attention`; CUDA,
    fp32/bf16/fp16: each block's summary in fp32 registers, q, k, v read in
    their dtype through their strides, no padded or blocked copies) and
    :func:`mhla_attention_reference` (PyTorch, any device).

    Args:
        q, k, v (Tensor): (B, h, N, d), N = H*W patches in raster order (no
            class token).
        mixing (Tensor): (M, M) block-mixing matrix W; ``W[i, b]`` weighs
            block b's summary for queries in block i. M = s^2.
        hw_shape (tuple[int, int]): Patch grid (H, W).
        backend (str): ``'auto'`` (fused on CUDA, the reference elsewhere
            and while exporting), ``'triton'`` or ``'torch'``.

    Returns:
        Tensor: (B, h, N, d) attention output (before the value conv), in
        the dtype of ``q``.
    """
    _blocks_per_side(mixing)
    if use_fused(backend, q, k, v):
        from .function import fused_mhla_attention

        return fused_mhla_attention(q, k, v, mixing, hw_shape, MHLA_EPS)
    return mhla_attention_reference(q, k, v, mixing, hw_shape)
