"""Kernel linear attention with rotary positions (RoFormer, arXiv
2104.09864, section 3.4.4).

The rotation goes into the numerator only; the normaliser stays that of
the unrotated features, so it remains positive for ELU+1::

    o_i = sum_j [R_i phi(q_i)]^T [R_j phi(k_j)] v_j
          / (sum_j phi(q_i)^T phi(k_j) + eps)

Linear time: ``S = (R phi(k))^T v``, ``z = phi(k)^T 1``,
``o_i = (R_i phi(q_i)) S / (phi(q_i) . z + eps)``. PyTorch only: the fused
kernels take no rotation.
"""

from torch import Tensor

from ..common.precision import fp32_accumulation
from ..common.rope import RopeTables, apply_rope
from .naive import feature_map


@fp32_accumulation(result_dtype_of='v')
def kernel_linear_attention_rope(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    rope: RopeTables,
    kernel: str = 'elu',
    eps: float = 1e-6,
) -> Tensor:
    """Kernel attention with RoPE on the feature-mapped q and k of the
    numerator, in at least fp32 with autocast off.

    Args:
        q, k (Tensor): (B, h, N, d), N = prefix tokens + H*W patches.
        v (Tensor): (B, h, N, d_v).
        rope (RopeTables): Tables of the patch grid (prefix tokens are not
            rotated).
        kernel (str): Feature map, see :func:`~.naive.feature_map`.
        eps (float): Added to the denominator.

    Returns:
        Tensor: (B, h, N, d_v) in the dtype of ``v``.
    """
    phi_q = feature_map(q, kernel)
    phi_k = feature_map(k, kernel)
    kv = apply_rope(phi_k, rope).transpose(-2, -1) @ v  # (B, h, d, d_v)
    z = phi_k.sum(dim=-2)  # (B, h, d)
    denominator = (phi_q @ z.unsqueeze(-1)) + eps  # (B, h, N, 1)
    return (apply_rope(phi_q, rope) @ kv) / denominator


@fp32_accumulation(result_dtype_of='q')
def kernel_attention_map_rope(
    q: Tensor,
    k: Tensor,
    rope: RopeTables,
    kernel: str = 'elu',
    eps: float = 1e-6,
) -> Tensor:
    """The (B, h, N, N) map :func:`kernel_linear_attention_rope` applies
    to the values: ``[R phi(q)] [R phi(k)]^T / (phi(q) phi(k)^T 1 + eps)``
    (signed; rows need not sum to 1). For analysis only."""
    phi_q = feature_map(q, kernel)
    phi_k = feature_map(k, kernel)
    rotated = apply_rope(phi_q, rope) @ apply_rope(phi_k, rope).transpose(
        -2, -1
    )
    denominator = phi_q @ phi_k.sum(dim=-2).unsqueeze(-1) + eps
    return rotated / denominator
