""":func:`~.dispatch.inline_attention` in PyTorch: the linear form,
O(N d^2) time, on any device."""

from torch import Tensor

from ..common.precision import fp32_accumulation


@fp32_accumulation(result_dtype_of='v')
def inline_attention_reference(
    q: Tensor, k: Tensor, v: Tensor, scale: float | None = None
) -> Tensor:
    """:func:`~.dispatch.inline_attention` in PyTorch ops, with autocast
    off and the key-value summary and means accumulated in at least fp32;
    the result is cast back to the dtype of ``v``. Shapes as there.
    """
    N, d = q.shape[-2:]
    s = d**-0.5 if scale is None else scale
    kv = k.transpose(-2, -1) @ v  # (B, h, d, d_v)
    k_mean = k.mean(dim=-2, keepdim=True)  # (B, h, 1, d)
    v_mean = v.mean(dim=-2, keepdim=True)  # (B, h, 1, d_v)
    offset = 1 - s * (q * k_mean).sum(dim=-1, keepdim=True)  # (B, h, N, 1)
    return (s / N) * (q @ kv) + offset * v_mean
