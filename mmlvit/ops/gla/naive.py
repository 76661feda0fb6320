"""Reference forms of GLA: the argument checks, the token-by-token
recurrence and the explicit T x T map (the tests' oracles), and the
chunked form in traceable ops that export takes: no autograd Function,
no in-place buffers, no branch on tensor values, no shape arithmetic on
the batch, every decay ``exp`` of a segment's log-gate sum masked to
-inf where it does not apply, so nothing overflows whatever the gates."""

import torch
import torch.nn.functional as F
from torch import Tensor

from ..common.precision import fp32_accumulation

# Tokens per chunk of the traceable form: small, as its decays cost T L d_k.
TRACEABLE_CHUNK_SIZE = 16


def check_shapes(q, k, v, *gates):
    """Raise a ValueError unless q, k and the gates are one (B, H, T, d_k)
    shape and v is (B, H, T, d_v)."""
    if q.dim() != 4 or any(t.shape != q.shape for t in (k, *gates)):
        raise ValueError(
            'q, k and the gates must share one (B, H, T, d_k) shape; got '
            f'{[tuple(t.shape) for t in (q, k, *gates)]}.'
        )
    if v.dim() != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(
            f'v must be (B, H, T, d_v) with (B, H, T) = {tuple(q.shape[:3])}; '
            f'got {tuple(v.shape)}.'
        )


def default_scale(q, scale):
    """``scale``, or d_k^-1/2 for q (B, H, T, d_k) when None (fla's
    default; the GLA paper, arXiv:2312.06635, uses none)."""
    return q.shape[-1] ** -0.5 if scale is None else scale


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
    """``A_ts = sum_c q_tc k_sc exp(G_tc - G_sc)`` for s <= t, else 0, G =
    cumsum(g); q, k, g (B, H, T, d_k) -> (B, H, T, T)."""
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
    """The (B, H, T, T) map A with ``A @ v == bidirectional_gla(...)``,
    ``A = (A^f + A^b) / 2``, per head::

        A^f_ts = scale sum_c q_tc k_sc exp(sum_{r=s+1}^{t} g^f_rc),  s <= t
        A^b_ts = scale sum_c q_tc k_sc exp(sum_{r=t}^{s-1} g^b_rc),  s >= t

    For analysis only (memory B H T^2 d_k).

    Args:
        q, k (Tensor): (B, H, T, d_k).
        g_fwd, g_bwd (Tensor): Log-gates (B, H, T, d_k), token order.
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


def segment_sums(x):
    """``out[..., t, s, :] = sum_{r=s+1}^{t} x[..., r, :]`` for s <= t, -inf
    above: x (..., T, d) -> (..., T, T, d). Each sum is taken over its own
    segment, not as a difference of long cumulative sums (fp32 precision)."""
    T = x.shape[-2]
    ones = torch.ones(T, T, dtype=torch.bool, device=x.device)
    after = ones.tril(-1).unsqueeze(-1)  # r > s
    copies = x.unsqueeze(-2).expand(*x.shape[:-1], T, x.shape[-1])
    sums = copies.masked_fill(~after, 0).cumsum(-3)
    return sums.masked_fill(~ones.tril().unsqueeze(-1), float('-inf'))


def causal_gla_traceable(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    scale: float,
    chunk_size: int = TRACEABLE_CHUNK_SIZE,
) -> Tensor:
    """Causal GLA in chunks of L = ``chunk_size`` tokens, no recurrence:
    the states entering every chunk come from one masked (n x n) product
    over chunks instead of a scan.

    Args:
        q, k, g (Tensor): (B, H, T, d_k), g the log-gates <= 0.
        v (Tensor): (B, H, T, d_v).
        scale (float): Query scale.
        chunk_size (int): L. Defaults to 16.

    Returns:
        Tensor: (B, H, T, d_v).
    """
    B, H, T, d_k = q.shape
    d_v = v.shape[-1]
    L = chunk_size
    pad = -T % L
    # Zero tokens with zero log-gates after the real ones change no output.
    q, k, v, g = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v, g))
    n = (T + pad) // L
    q, k, g = (t.reshape(B, H, n, L, d_k) for t in (q, k, g))
    v = v.reshape(B, H, n, L, d_v)
    within = segment_sums(g).exp()  # (B, H, n, L, L, d_k)
    out = (q.unsqueeze(4) * k.unsqueeze(3) * within).sum(-1) @ v
    from_start = g.cumsum(3).exp()
    after = F.pad(g[:, :, :, 1:], (0, 0, 0, 1))  # g_{t+1}, 0 at the end
    to_end = after.flip(3).cumsum(3).flip(3).exp()
    summaries = (k * to_end).transpose(-2, -1) @ v  # (B, H, n, d_k, d_v)
    totals = g.sum(3)  # (B, H, n, d_k)
    # A(i, j) = the segment sum from chunk i to chunk j - 1: shift one row.
    spans = segment_sums(totals)  # (B, H, n, n, d_k)
    no_state = torch.full_like(spans[:, :, :1], float('-inf'))
    across = torch.cat([no_state, spans[:, :, :-1]], dim=2).exp()
    # E_j[c] = sum_i across[j, i, c] S_i[c]: one matmul per channel c.
    entering = across.permute(0, 1, 4, 2, 3) @ summaries.transpose(2, 3)
    entering = entering.transpose(2, 3)  # (B, H, n, d_k, d_v)
    out = out + (q * from_start) @ entering
    return out.reshape(B, H, n * L, d_v)[:, :, :T] * scale


@fp32_accumulation(result_dtype_of='v')
def bidirectional_gla_traceable(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g_fwd: Tensor,
    g_bwd: Tensor,
    scale: float,
    chunk_size: int = TRACEABLE_CHUNK_SIZE,
) -> Tensor:
    """``(o^f + flip(o^b)) / 2`` by :func:`causal_gla_traceable`, both
    directions stacked along the heads (not the batch, so the traced graph
    keeps a dynamic batch): the export path of ``bidirectional_gla``. q, k,
    g_fwd, g_bwd (B, H, T, d_k), v (B, H, T, d_v) -> (B, H, T, d_v), v's
    dtype."""
    H = q.shape[1]
    o = causal_gla_traceable(
        torch.cat([q, q.flip(2)], dim=1),
        torch.cat([k, k.flip(2)], dim=1),
        torch.cat([v, v.flip(2)], dim=1),
        torch.cat([g_fwd, g_bwd.flip(2)], dim=1),
        scale / 2,
        chunk_size,
    )
    return o[:, :H] + o[:, H:].flip(2)
