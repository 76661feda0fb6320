"""Gated linear attention (GLA, Yang et al. 2024), causal and bidirectional.

Per head, with queries/keys q, k (T x d_k), values v (T x d_v) and log-gates
g = log(alpha) <= 0 (T x d_k), the causal recurrence is::

    S_t = diag(alpha_t) S_{t-1} + k_t^T v_t        (d_k x d_v, S_0 = 0)
    o_t = scale * q_t S_t

(the decay is applied before token t is added), i.e.
``o_t = scale * sum_{s<=t} sum_c q_tc k_sc exp(G_tc - G_sc) v_s`` with
G = cumsum(g). The bidirectional operator for image tokens (ViG) averages a
forward scan and a scan over the reversed sequence with its own gates::

    o = (o^f + flip(o^b)) / 2

All functions take the layout (B, H, T, d), run with autocast off, keep
states, gates and decays in at least fp32 (fp64 for fp64 inputs) and return
the dtype of ``v`` (of ``q`` for the map). ``scale`` defaults to d_k^-1/2,
fla's default (the GLA paper uses none).
"""

import functools

import torch
import torch.nn.functional as F

from .kernel_attention import accumulation_dtype

BACKENDS = ('auto', 'torch', 'fla')


def _check_shapes(q, k, v, *gates):
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


def _upcast(*tensors):
    """The tensors in one dtype, at least fp32."""
    acc = accumulation_dtype(
        functools.reduce(torch.promote_types, (t.dtype for t in tensors))
    )
    return [t.to(acc) for t in tensors]


def _default_scale(q, scale):
    return q.shape[-1] ** -0.5 if scale is None else scale


def gla_recurrent(q, k, v, g, scale=None):
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
    _check_shapes(q, k, v, g)
    scale, out_dtype = _default_scale(q, scale), v.dtype
    with torch.autocast(q.device.type, enabled=False):
        q, k, v, g = _upcast(q, k, v, g)
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
        o = torch.stack(outputs, dim=2)
    return o.to(out_dtype)


def _level_sizes(L):
    """Half-block sizes h = 1, 2, 4, ..., L/2 of a chunk of L = 2^m."""
    return [2**i for i in range(L.bit_length() - 1)]


def _halves(t, h):
    """(left, right) halves of each block of 2h tokens: views
    (..., L / 2h, h, d) of t (..., L, d)."""
    return t.unflatten(-2, (t.shape[-2] // (2 * h), 2, h)).unbind(-3)


def _quadrant(scores, h):
    """The (right half, left half) quadrant of each diagonal block of 2h
    tokens: a view (..., L / 2h, h, h) of scores (..., L, L)."""
    M = scores.shape[-1] // (2 * h)
    blocks = scores.unflatten(-2, (M, 2, h)).unflatten(-1, (M, 2, h))
    quadrants = blocks.diagonal(dim1=-6, dim2=-3)[..., 1, :, 0, :, :]
    return quadrants.movedim(-1, -3)


def _decayed_halves(q, k, b, h):
    """Right-half queries and left-half keys of each block of 2h tokens,
    decayed to the last token r of the left half, and their decays:
    ``q_i exp(b_i - b_r)``, ``k_j exp(b_r - b_j)``, both exponents <= 0."""
    (_, q_right), (k_left, _), (b_left, b_right) = (
        _halves(t, h) for t in (q, k, b)
    )
    ref = b_left[..., -1:, :]
    decay_q, decay_k = (b_right - ref).exp(), (ref - b_left).exp()
    return q_right * decay_q, k_left * decay_k, decay_q, decay_k


def _intra_chunk_scores(q, k, b):
    """Causal scores inside each chunk of L = 2^m tokens.

    ``A_ij = q_i . (k_j * exp(b_i - b_j))`` for j <= i, else 0, where b is
    the cumulative log-gate inside the chunk. A pair j < i is split at the
    smallest aligned block of 2h tokens holding j in its left half and i in
    its right half; with r the last token of the left half,
    ``exp(b_i - b_j) = exp(b_i - b_r) * exp(b_r - b_j)`` and both exponents
    are <= 0, so nothing overflows and each level h is one batched matmul of
    decayed queries by decayed keys. Diagonal pairs have no decay.

    Args:
        q, k, b (Tensor): (..., L, d_k).

    Returns:
        Tensor: (..., L, L), lower triangular.
    """
    L = q.shape[-2]
    scores = q.new_zeros(*q.shape[:-1], L)
    scores.diagonal(dim1=-2, dim2=-1).copy_((q * k).sum(-1))
    for h in _level_sizes(L):
        q_decayed, k_decayed, _, _ = _decayed_halves(q, k, b, h)
        _quadrant(scores, h).copy_(q_decayed @ k_decayed.transpose(-2, -1))
    return scores


def _intra_chunk_scores_grads(q, k, b, d_scores):
    """Gradients of q and k through :func:`_intra_chunk_scores` (with the
    decays held fixed) from d_scores (..., L, L)."""
    diagonal = d_scores.diagonal(dim1=-2, dim2=-1).unsqueeze(-1)
    dq, dk = diagonal * k, diagonal * q
    for h in _level_sizes(q.shape[-2]):
        q_decayed, k_decayed, decay_q, decay_k = _decayed_halves(q, k, b, h)
        d_cross = _quadrant(d_scores, h)
        _halves(dq, h)[1].add_((d_cross @ k_decayed) * decay_q)
        _halves(dk, h)[0].add_(
            (d_cross.transpose(-2, -1) @ q_decayed) * decay_k
        )
    return dq, dk


def _state_scan(updates, decays, reverse=False):
    """``S_c = decays_c * S_{c-1} + updates_{c-1}`` over chunks c, S_0 = 0
    (or the mirror image with ``reverse``): the state entering each chunk.

    Args:
        updates (Tensor): (B, H, n, d_k, d_v).
        decays (Tensor): (B, H, n, d_k, 1), the decay over each chunk.
    """
    order = range(updates.shape[2])
    state = torch.zeros_like(updates[:, :, 0])
    entering = []
    for c in reversed(order) if reverse else order:
        entering.append(state)
        state = torch.addcmul(updates[:, :, c], state, decays[:, :, c])
    return torch.stack(entering[::-1] if reverse else entering, dim=2)


class _ChunkedGLA(torch.autograd.Function):
    """Causal GLA on whole chunks: q (already scaled), k, v, g as
    (B, H, n, L, d) -> o (B, H, n, L, d_v).

    The backward is written out. The log-gates enter only through decays
    ``exp(G_t - G_s)`` with G = cumsum(g) over the sequence, so
    ``dL/dG_t = q_t * dq_t - k_t * dk_t`` and dg is its reverse cumulative
    sum (as in fla's kernels): no graph through the decays is kept.
    """

    @staticmethod
    def forward(ctx, q, k, v, g):
        b = g.cumsum(-2)  # cumulative log-gate inside each chunk, <= 0
        b_last = b[..., -1:, :]
        # Chunk summaries with keys decayed to the chunk end.
        summaries = (k * (b_last - b).exp()).transpose(-2, -1) @ v
        entering = _state_scan(summaries, b_last.transpose(-2, -1).exp())
        scores = _intra_chunk_scores(q, k, b)
        o = scores @ v + (q * b.exp()) @ entering
        ctx.save_for_backward(q, k, v, b, scores, entering)
        return o

    @staticmethod
    def backward(ctx, d_o):
        q, k, v, b, scores, entering = ctx.saved_tensors
        b_last = b[..., -1:, :]
        decay_q, decay_k = b.exp(), (b_last - b).exp()
        # Inside the chunks.
        dq, dk = _intra_chunk_scores_grads(q, k, b, d_o @ v.transpose(-2, -1))
        dv = scores.transpose(-2, -1) @ d_o
        # Through the states: d_summaries_c = dL/dS_{c+1}.
        dq += (d_o @ entering.transpose(-2, -1)) * decay_q
        d_entering = (q * decay_q).transpose(-2, -1) @ d_o
        d_summaries = _state_scan(
            d_entering, b_last.transpose(-2, -1).exp(), reverse=True
        )
        dv += (k * decay_k) @ d_summaries
        dk += (v @ d_summaries.transpose(-2, -1)) * decay_k
        # dL/dg_r = sum_{t >= r} dL/dG_t over the whole sequence.
        dG = (q * dq - k * dk).flatten(2, 3)
        dg = dG.flip(2).cumsum(2).flip(2).unflatten(2, b.shape[2:4])
        return dq, dk, dv, dg


def _chunked_scan(q, k, v, g, chunk_size):
    """Causal GLA on upcast inputs with q already scaled; see
    :func:`gla_chunked`."""
    if chunk_size < 1 or chunk_size & (chunk_size - 1):
        raise ValueError(
            f'chunk_size must be a power of two, got {chunk_size}.'
        )
    T, L = q.shape[2], chunk_size
    n = -(-T // L)
    # Zero tokens with zero log-gates at the end change no earlier output.
    q, k, v, g = (
        F.pad(t, (0, 0, 0, n * L - T)).unflatten(2, (n, L))
        for t in (q, k, v, g)
    )
    return _ChunkedGLA.apply(q, k, v, g).flatten(2, 3)[:, :, :T]


def gla_chunked(q, k, v, g, scale=None, chunk_size=64):
    """Causal GLA, chunked: the same function as :func:`gla_recurrent`.

    The sequence is cut into chunks of ``chunk_size`` tokens (the last one
    zero-padded). Inside a chunk the scores are formed with decay factors
    that are all exponentials of non-positive differences of cumulative
    log-gates (see ``_intra_chunk_scores``); across chunks a d_k x d_v state
    is passed, one step per chunk. The backward is written out (first
    order only; dg from ``q * dq - k * dk``). Time O(T (L d + d^2)), memory
    O(T (L + d + d^2 / L)) per head, states in at least fp32.

    Args:
        q (Tensor): Queries (B, H, T, d_k).
        k (Tensor): Keys (B, H, T, d_k).
        v (Tensor): Values (B, H, T, d_v).
        g (Tensor): Log-gates log(alpha) <= 0, (B, H, T, d_k).
        scale (float, optional): Query scale. Defaults to d_k^-1/2.
        chunk_size (int): Tokens per chunk, a power of two. Defaults to 64.

    Returns:
        Tensor: (B, H, T, d_v) in the dtype of ``v``.
    """
    _check_shapes(q, k, v, g)
    scale, out_dtype = _default_scale(q, scale), v.dtype
    with torch.autocast(q.device.type, enabled=False):
        q, k, v, g = _upcast(q, k, v, g)
        o = _chunked_scan(q * scale, k, v, g, chunk_size)
    return o.to(out_dtype)


@functools.cache
def _fla_chunk_gla():
    """fla's chunked GLA kernel (``fla.ops.gla.chunk_gla``)."""
    try:
        from fla.ops.gla import chunk_gla
    except ImportError as e:
        raise ImportError(
            "backend='fla' needs the fla-core package (fla.ops.gla."
            "chunk_gla); install it or use backend='torch'."
        ) from e
    return chunk_gla


@functools.cache
def _fla_importable():
    try:
        _fla_chunk_gla()
    except ImportError:
        return False
    return True


def _resolve_backend(backend, device):
    """'torch' or 'fla' for ``backend`` on ``device``."""
    if backend not in BACKENDS:
        raise ValueError(
            f'Unknown GLA backend {backend!r}; expected one of {BACKENDS}.'
        )
    if backend == 'auto':
        use_fla = device.type == 'cuda' and _fla_importable()
        return 'fla' if use_fla else 'torch'
    if backend == 'fla' and device.type != 'cuda':
        raise RuntimeError(
            "backend='fla' runs fla's Triton kernels, which need CUDA "
            f"tensors; got tensors on {device}. Use backend='torch' (or "
            "'auto', which picks the PyTorch path off CUDA)."
        )
    return backend


def _bidirectional_fla(q, k, v, g_fwd, g_bwd, scale):
    """Both scans in one ``chunk_gla`` call: the forward sequences and the
    reversed ones stacked along the batch, in fla's (B, T, H, d) layout.
    The log-gates go in as fp32; no initial state is passed (fla's zero
    state, kept in fp32 by the kernel)."""
    chunk_gla = _fla_chunk_gla()

    def both_directions(forward, backward):
        stacked = torch.cat([forward, backward.flip(2)], dim=0)
        return stacked.transpose(1, 2)

    o, _ = chunk_gla(
        both_directions(q, q),
        both_directions(k, k),
        both_directions(v, v),
        both_directions(g_fwd, g_bwd).float(),
        scale=scale,
    )
    o_fwd, o_bwd = o.transpose(1, 2).float().chunk(2, dim=0)
    return ((o_fwd + o_bwd.flip(2)) / 2).to(v.dtype)


def bidirectional_gla(
    q, k, v, g_fwd, g_bwd, scale=None, backend='auto', chunk_size=64
):
    """Bidirectional GLA: ``(o^f + flip(o^b)) / 2``.

    ``o^f`` is the causal scan with gates ``g_fwd``; ``o^b`` the causal scan
    of the reversed sequence with the reversed ``g_bwd``, so token t sees
    keys s >= t decayed by ``prod_{r=t}^{s-1} alpha^b_r``.

    Args:
        q (Tensor): Queries (B, H, T, d_k).
        k (Tensor): Keys (B, H, T, d_k).
        v (Tensor): Values (B, H, T, d_v).
        g_fwd (Tensor): Forward log-gates <= 0, (B, H, T, d_k), in token
            order.
        g_bwd (Tensor): Backward log-gates <= 0, (B, H, T, d_k), in token
            order.
        scale (float, optional): Query scale. Defaults to d_k^-1/2.
        backend (str): ``'torch'`` (:func:`gla_chunked`, any device),
            ``'fla'`` (fla's Triton ``chunk_gla``, CUDA only) or ``'auto'``
            (fla on CUDA when it imports, else torch). Defaults to 'auto'.
        chunk_size (int): Chunk of the torch path. Defaults to 64.

    Returns:
        Tensor: (B, H, T, d_v) in the dtype of ``v``.
    """
    _check_shapes(q, k, v, g_fwd, g_bwd)
    scale = _default_scale(q, scale)
    if _resolve_backend(backend, q.device) == 'fla':
        return _bidirectional_fla(q, k, v, g_fwd, g_bwd, scale)
    out_dtype = v.dtype
    with torch.autocast(q.device.type, enabled=False):
        q, k, v, g_fwd, g_bwd = _upcast(q, k, v, g_fwd, g_bwd)
        o = _chunked_scan(
            torch.cat([q, q.flip(2)]) * scale,
            torch.cat([k, k.flip(2)]),
            torch.cat([v, v.flip(2)]),
            torch.cat([g_fwd, g_bwd.flip(2)]),
            chunk_size,
        )
        o_fwd, o_bwd = o.chunk(2, dim=0)
        o = (o_fwd + o_bwd.flip(2)) / 2
    return o.to(out_dtype)


def _causal_map(q, k, g):
    """``A_ts = sum_c q_tc k_sc exp(G_tc - G_sc)`` for s <= t, else 0, with
    G = cumsum(g); the exponent differences are masked before exp."""
    G = g.cumsum(2)
    T = q.shape[2]
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    exponent = G.unsqueeze(3) - G.unsqueeze(2)  # (B, H, t, s, d_k)
    decay = exponent.masked_fill(future.unsqueeze(-1), float('-inf')).exp()
    return (decay * q.unsqueeze(3) * k.unsqueeze(2)).sum(-1)


def bidirectional_gla_map(q, k, g_fwd, g_bwd, scale=None):
    """The (B, H, T, T) map A with ``A @ v == bidirectional_gla(...)``.

    ``A = (A^f + A^b) / 2`` (specs/operators.md section 5), per head::

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
    _check_shapes(q, k, q, g_fwd, g_bwd)
    scale = _default_scale(q, scale)
    with torch.autocast(q.device.type, enabled=False):
        q32, k32, g_fwd, g_bwd = _upcast(q, k, g_fwd, g_bwd)
        forward = _causal_map(q32, k32, g_fwd)
        backward = _causal_map(q32.flip(2), k32.flip(2), g_bwd.flip(2))
        backward = backward.flip(2, 3)
        attn = (forward + backward) * (scale / 2)
    return attn.to(q.dtype)
