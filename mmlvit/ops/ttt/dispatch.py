"""Test-time-training inner models of the ViT^3 block (Han et al. 2026):
a SwiGLU model per head and a depthwise 3x3 conv head, each fitted to the
image's keys and values with one closed-form step and applied to its
queries (the math: :mod:`.naive`).

Each head has two paths: fused Triton kernels (:mod:`.swiglu_function`,
:mod:`.dwconv_function`; CUDA, fp32/bf16/fp16: the inner step's N-sized
intermediates live in fp32 registers, q, k, v are read in their dtype
and never copied) and the PyTorch reference, which runs in fp32 and
recomputes its intermediates in backward.
"""

from torch import Tensor

from ..common.dispatch import use_fused
from ..common.recompute import recomputed
from .naive import TTT_INNER_SCALE, ttt_dwconv_reference, ttt_swiglu_reference

__all__ = ['ttt_dwconv', 'ttt_swiglu']


def ttt_swiglu(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    w1: Tensor,
    w2: Tensor,
    scale: float = TTT_INNER_SCALE,
    backend: str = 'auto',
) -> Tensor:
    """SwiGLU inner model: one step on (k, v), then applied to q
    (:func:`.naive.ttt_swiglu_reference`).

    Args:
        q, k, v (Tensor): (B, h, N, d), any strides with a unit last
            stride (e.g. views of a ``qkv`` projection).
        w1, w2 (Tensor): (1 or B, h, d, d) initial inner weights.
        scale (float): eta. Defaults to 9^-1/2.
        backend (str): ``'auto'`` (fused on CUDA, the reference elsewhere
            and while exporting), ``'triton'`` or ``'torch'``; see
            :func:`mmlvit.ops.common.dispatch.use_fused`.

    Returns:
        Tensor: (B, h, N, d) = (q W1') * silu(q W2') in the dtype of q.
    """
    if use_fused(backend, q, k, v):
        from .swiglu_function import fused_ttt_swiglu

        return fused_ttt_swiglu(q, k, v, w1, w2, scale)
    return recomputed(ttt_swiglu_reference, q, k, v, w1, w2, scale)


def ttt_dwconv(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    w3: Tensor,
    scale: float = TTT_INNER_SCALE,
    backend: str = 'auto',
) -> Tensor:
    """Depthwise 3x3 conv inner model: one step on (k, v), then applied to
    q (:func:`.naive.ttt_dwconv_reference`).

    Args:
        q, k, v (Tensor): (B, d, H, W) on the patch grid, any strides (e.g.
            views of a token-major ``qkv`` projection).
        w3 (Tensor): (d, 1, 3, 3) learned initial kernel.
        scale (float): eta. Defaults to 9^-1/2.
        backend (str): As :func:`ttt_swiglu`'s.

    Returns:
        Tensor: (B, d, H, W) in the dtype of q.
    """
    # The channels are the conv head's width: check them as the last axis.
    # Its kernels (the depthwise convolution's) need little shared memory.
    grids = (t.movedim(1, -1) for t in (q, k, v))
    if use_fused(backend, *grids, needs_shared_memory=False):
        from .dwconv_function import fused_ttt_dwconv

        return fused_ttt_dwconv(q, k, v, w3, scale)
    return recomputed(ttt_dwconv_reference, q, k, v, w3, scale)
