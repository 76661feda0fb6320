"""InLine attention (Han et al., NeurIPS 2024), attention-only form.

Identity kernel with subtraction normalisation. For one head with queries,
keys, values q, k, v (N x d), scale s and the key/value means k_bar, v_bar::

    A_ij = (s/N) q_i . k_j + (1/N) (1 - s q_i . k_bar)     (rows sum to 1)
    o_i  = (s/N) q_i (k^T v) + (1 - s q_i . k_bar) v_bar  (= (A v)_i)

The map is signed and needs no eps. The linear form costs O(N d^2).
"""

from torch import Tensor

from ..common.precision import fp32_accumulation


@fp32_accumulation(result_dtype_of='q')
def inline_attention_map(
    q: Tensor, k: Tensor, scale: float | None = None
) -> Tensor:
    """The signed (B, h, N, N) map that
    :func:`~.dispatch.inline_attention` applies to the values:
    ``A_ij = (s/N) q_i . k_j + (1/N) (1 - s q_i . k_bar)``.

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
