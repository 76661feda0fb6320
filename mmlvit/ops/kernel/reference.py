""":func:`~.dispatch.kernel_linear_attention` in PyTorch: the linear form,
O(N d^2) time, on any device."""

from torch import Tensor

from ..common.precision import fp32_accumulation
from .naive import feature_map


@fp32_accumulation(result_dtype_of='v')
def kernel_linear_attention_reference(
    q: Tensor, k: Tensor, v: Tensor, kernel: str = 'elu', eps: float = 1e-6
) -> Tensor:
    """:func:`~.dispatch.kernel_linear_attention` in PyTorch ops, with
    autocast off and the key-value summary, normaliser and output
    accumulated in at least fp32; the result is cast back to the dtype of
    ``v``. Shapes as there.
    """
    phi_q = feature_map(q, kernel)
    phi_k = feature_map(k, kernel)
    kv = phi_k.transpose(-2, -1) @ v  # (B, h, d, d_v)
    z = phi_k.sum(dim=-2)  # (B, h, d)
    denominator = (phi_q @ z.unsqueeze(-1)) + eps  # (B, h, N, 1)
    return (phi_q @ kv) / denominator
