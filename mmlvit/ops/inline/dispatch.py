"""InLine attention (Han et al., NeurIPS 2024), attention-only form.

Identity kernel with subtraction normalisation. For one head with queries,
keys, values q, k, v (N x d), scale s and the key/value means k_bar, v_bar::

    A_ij = (s/N) q_i . k_j + (1/N) (1 - s q_i . k_bar)     (rows sum to 1)
    o_i  = (s/N) q_i (k^T v) + (1 - s q_i . k_bar) v_bar  (= (A v)_i)

The map is signed and needs no eps. The linear form costs O(N d^2).
"""

from torch import Tensor

from ..common.dispatch import use_fused
from ..common.precision import fp32_accumulation


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


@fp32_accumulation(result_dtype_of='v')
def inline_attention_reference(
    q: Tensor, k: Tensor, v: Tensor, scale: float | None = None
) -> Tensor:
    """:func:`inline_attention` in PyTorch ops, with autocast off and the
    key-value summary and means accumulated in at least fp32; the result is
    cast back to the dtype of ``v``. Shapes as there.
    """
    N, d = q.shape[-2:]
    s = d**-0.5 if scale is None else scale
    kv = k.transpose(-2, -1) @ v  # (B, h, d, d_v)
    k_mean = k.mean(dim=-2, keepdim=True)  # (B, h, 1, d)
    v_mean = v.mean(dim=-2, keepdim=True)  # (B, h, 1, d_v)
    offset = 1 - s * (q * k_mean).sum(dim=-1, keepdim=True)  # (B, h, N, 1)
    return (s / N) * (q @ kv) + offset * v_mean


@fp32_accumulation(result_dtype_of='q')
def inline_attention_map(
    q: Tensor, k: Tensor, scale: float | None = None
) -> Tensor:
    """The signed (B, h, N, N) map that :func:`inline_attention` applies to
    the values: ``A_ij = (s/N) q_i . k_j + (1/N) (1 - s q_i . k_bar)``.

    O(N^2) memory, for analysis and map matching only. Computed in at least
    fp32 with autocast off and cast back to the dtype of ``q``.

    Args:
        q (Tensor): Queries (B, h, N, d).
        k (Tensor): Keys (B, h, N, d).
        scale (float, optional): s; defaults to d^-1/2.

    Returns:
        Tensor: (B, h, N, N), each row summing to 1.
    """
    N, d = q.shape[-2:]
    s = d**-0.5 if scale is None else scale
    k_mean = k.mean(dim=-2, keepdim=True)
    offset = 1 - s * (q * k_mean).sum(dim=-1, keepdim=True)
    return (s / N) * (q @ k.transpose(-2, -1)) + offset / N
