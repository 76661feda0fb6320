"""Which path an InLine attention call takes: the fused Triton kernels
(:mod:`mmlvit.ops.common.linear_function`) or the PyTorch reference."""

from torch import Tensor

from ..common.dispatch import use_fused
from .reference import inline_attention_reference


def inline_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scale: float | None = None,
    backend: str = 'auto',
) -> Tensor:
    """Linear-time InLine attention, every token (class token included)
    counted in N.

    Two paths compute it: fused Triton kernels
    (:mod:`mmlvit.ops.common.linear_function`; CUDA,
    fp32/bf16/fp16: the key-value summary and the means in fp32 registers,
    q, k, v read in their dtype and never copied) and
    :func:`inline_attention_reference` (PyTorch, any device).

    Args:
        q (Tensor): Queries (B, h, N, d).
        k (Tensor): Keys (B, h, N, d).
        v (Tensor): Values (B, h, N, d_v).
        scale (float, optional): s; defaults to d^-1/2.
        backend (str): ``'auto'`` (fused on CUDA, the reference elsewhere
            and while exporting), ``'triton'`` or ``'torch'``.

    Returns:
        Tensor: (B, h, N, d_v) in the dtype of ``v``.
    """
    if use_fused(backend, q, k, v):
        from ..common.linear_function import fused_linear_attention

        return fused_linear_attention(q, k, v, 'inline', scale=scale)
    return inline_attention_reference(q, k, v, scale)
