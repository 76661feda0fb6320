"""Which path a kernel-attention call takes: the fused Triton kernels
(:mod:`mmlvit.ops.common.linear_function`) or the PyTorch reference."""

from torch import Tensor

from ..common.dispatch import use_fused
from .naive import check_kernel
from .reference import kernel_linear_attention_reference


def kernel_linear_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    kernel: str = 'elu',
    eps: float = 1e-6,
    backend: str = 'auto',
) -> Tensor:
    """Linear-time non-causal kernel attention.

    Two paths compute it: fused Triton kernels
    (:mod:`mmlvit.ops.common.linear_function`; CUDA,
    fp32/bf16/fp16: feature maps, key-value summary and normaliser in fp32
    registers, q, k, v read in their dtype and never copied) and
    :func:`kernel_linear_attention_reference` (PyTorch, any device).

    Args:
        q (Tensor): Queries (B, h, N, d).
        k (Tensor): Keys (B, h, N, d).
        v (Tensor): Values (B, h, N, d_v).
        kernel (str): Feature map, see :func:`~.naive.feature_map`.
        eps (float): Added to the denominator. Rows whose denominator is
            0 (possible with ReLU) give a zero output.
        backend (str): ``'auto'`` (fused on CUDA, the reference elsewhere
            and while exporting), ``'triton'`` or ``'torch'``.

    Returns:
        Tensor: (B, h, N, d_v) in the dtype of ``v``.
    """
    check_kernel(kernel)
    if use_fused(backend, q, k, v):
        from ..common.linear_function import fused_linear_attention

        return fused_linear_attention(q, k, v, kernel, eps)
    return kernel_linear_attention_reference(q, k, v, kernel, eps)
