"""Reference forms of GLA: the token-by-token recurrence and the explicit
T x T map of the bidirectional operator (docs/operators.md, GLA)."""

import torch
from torch import Tensor

from ..common.precision import fp32_accumulation
from .arguments import check_shapes, default_scale


@fp32_accumulation(result_dtype_of='v')
def gla_recurrent(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, scale: float | None = None
) -> Tensor:
    """Causal GLA as the token-by-token recurrence (the reference).

    Args:
        q (Tensor): Queries (B, H, T, d_k).
        k (Tensor): Keys (B, H, T, d_k).
        v (Tensor): Values (B, H, T, d_v).
        g (Tensor): Log-gates log(alpha) <= 0, (B, H, T, d_k).
        scale (float, optional): Query scale. Defaults to d_k^-1/2.

    Returns:
        Tensor: (B, H, T, d_v) in the dtype of ``v``.
    """
    check_shapes(q, k, v, g)
    scale = default_scale(q, scale)
    B, H, _, K = q.shape
    state = q.new_zeros(B, H, K, v.shape[-1])
    outputs = []
    for q_t, k_t, v_t, alpha_t in zip(
        (q * scale).unbind(2), k.unbind(2), v.unbind(2), g.exp().unbind(2)
    ):
        state = torch.addcmul(
            state * alpha_t.unsqueeze(-1),
            k_t.unsqueeze(-1),
            v_t.unsqueeze(-2),
        )
        outputs.append((q_t.unsqueeze(-2) @ state).squeeze(-2))
    return torch.stack(outputs, dim=2)


def _causal_map(q, k, g):
    """``A_ts = sum_c q_tc k_sc exp(G_tc - G_sc)`` for s <= t, else 0, with
    G = cumsum(g); the exponent differences are masked before exp.

    Args:
        q, k, g (Tensor): (B, H, T, d_k).

    Returns:
        Tensor: (B, H, T, T).
    """
    G = g.cumsum(2)
    T = q.shape[2]
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    exponent = G.unsqueeze(3) - G.unsqueeze(2)  # (B, H, t, s, d_k)
    decay = exponent.masked_fill(future.unsqueeze(-1), float('-inf')).exp()
    return (decay * q.unsqueeze(3) * k.unsqueeze(2)).sum(-1)


@fp32_accumulation(result_dtype_of='q')
def bidirectional_gla_map(
    q: Tensor,
    k: Tensor,
    g_fwd: Tensor,
    g_bwd: Tensor,
    scale: float | None = None,
) -> Tensor:
    """The (B, H, T, T) map A with ``A @ v == bidirectional_gla(...)``.

    ``A = (A^f + A^b) / 2`` (docs/operators.md, GLA), per head::

        A^f_ts = scale sum_c q_tc k_sc exp(sum_{r=s+1}^{t} g^f_rc),  s <= t
        A^b_ts = scale sum_c q_tc k_sc exp(sum_{r=t}^{s-1} g^b_rc),  s >= t

    signed and not row-normalised. Built in at least fp32 with the exponent
    differences masked before exp; memory B H T^2 d_k, for analysis only.

    Args:
        q (Tensor): Queries (B, H, T, d_k).
        k (Tensor): Keys (B, H, T, d_k).
        g_fwd (Tensor): Forward log-gates (B, H, T, d_k), token order.
        g_bwd (Tensor): Backward log-gates (B, H, T, d_k), token order.
        scale (float, optional): Query scale. Defaults to d_k^-1/2.

    Returns:
        Tensor: (B, H, T, T) in the dtype of ``q``.
    """
    check_shapes(q, k, q, g_fwd, g_bwd)
    scale = default_scale(q, scale)
    forward = _causal_map(q, k, g_fwd)
    backward = _causal_map(q.flip(2), k.flip(2), g_bwd.flip(2))
    backward = backward.flip(2, 3)
    return (forward + backward) * (scale / 2)
