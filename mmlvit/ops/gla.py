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


# Largest log-decay one chunk may span after its first token (see
# ``_chunk_forward_``): keys grown by up to exp(40) and queries shrunk by as
# much stay far from fp32's overflow (exp(88)) and underflow (exp(-103)).
MAX_CHUNK_LOG_DECAY = 40.0


def _state_scan(updates, decays, reverse=False):
    """``S_c = decays_c * S_{c-1} + updates_{c-1}`` over chunks c, S_0 = 0
    (or the mirror image with ``reverse``): the state entering each chunk.

    Args:
        updates (Tensor): (B, H, n, d_k, d_v).
        decays (Tensor): (B, H, n, d_k, 1), the decay over each chunk.
    """
    steps = range(updates.shape[2])
    steps = steps[::-1] if reverse else steps
    entering = torch.empty_like(updates)
    state = entering[:, :, steps[0]].zero_()
    for prev, c in zip(steps, steps[1:]):
        state = torch.addcmul(
            updates[:, :, prev],
            state,
            decays[:, :, prev],
            out=entering[:, :, c],
        )
    return entering


def _cumsum_rows_(x, reverse=False):
    """In-place cumulative sum over dim -2 (the L tokens of each chunk), one
    vectorised add per row: on the CPU much faster than ``cumsum`` along a
    dimension that is not the last."""
    for i in range(1, x.shape[-2]):
        if reverse:
            x[..., -1 - i, :] += x[..., -i, :]
        else:
            x[..., i, :] += x[..., i - 1, :]
    return x


def _chunk_forward_(q, k, v, g):
    """Causal GLA on whole chunks: q (already scaled), k, v, g as
    (B, H, n, L, d) -> o (B, H, n, L, d_v) and the tensors the backward
    needs. Overwrites q, k and g (the caller's chunk buffers).

    With b the cumulative log-gate inside a chunk and b_0 its value at the
    chunk's first token, every decay inside the chunk factorises as
    ``exp(b_i - b_j) = exp(b_i - b_0) / exp(b_j - b_0)``, so the intra-chunk
    scores are one matmul of decayed queries by grown keys, and the
    inter-chunk terms are matmuls with the d_k x d_v state. The factors lie
    in [exp(-R), 1] and [1, exp(R)], R the log-decay the chunk spans after
    its first token, which the caller keeps <= ``MAX_CHUNK_LOG_DECAY``.
    """
    b = _cumsum_rows_(g)
    b_first, b_last = b[..., :1, :], b[..., -1:, :]
    decay = (b - b_first).exp_()  # (..., L, d_k), in [exp(-R), 1]
    q_in, k_in = q.mul_(decay), k.div_(decay)
    scores = (q_in @ k_in.transpose(-2, -1)).tril_()
    # Chunk summaries, keys decayed to the chunk's last token.
    to_last = (b_last - b_first).exp_().transpose(-2, -1)
    summaries = to_last * (k_in.transpose(-2, -1) @ v)
    chunk_decay = b_last.exp().transpose(-2, -1)
    entering = _state_scan(summaries, chunk_decay)
    # The entering state decayed to the chunk's first token.
    to_first = b_first.exp().transpose(-2, -1)
    states = to_first * entering
    o = torch.matmul(q_in, states).add_(scores @ v)
    saved = (q_in, k_in, v, decay, scores, states, to_first, to_last)
    return o, (*saved, chunk_decay)


def _chunk_backward(d_o, q_in, k_in, v, decay, scores, states, *decays):
    """Gradients of q, k, v, g of :func:`_chunk_forward_` from d_o.

    The log-gates enter only through decays ``exp(G_t - G_s)`` with
    G = cumsum(g) over the sequence, so ``dL/dG_t = q_t * dq_t - k_t * dk_t``
    (= ``q_in * dq_in - k_in * dk_in``) and dg is its reverse cumulative sum
    (as in fla's kernels): no graph through the decays is kept.
    """
    to_first, to_last, chunk_decay = decays
    d_scores = (d_o @ v.transpose(-2, -1)).tril_()
    dq_in = torch.matmul(d_o, states.transpose(-2, -1))
    dq_in += d_scores @ k_in
    # Through the states: d_summaries_c = dL/dS_{c+1}.
    d_entering = to_first * (q_in.transpose(-2, -1) @ d_o)
    d_summaries = _state_scan(d_entering, chunk_decay, reverse=True)
    d_kv = to_last * d_summaries
    dv = torch.matmul(k_in, d_kv).add_(scores.transpose(-2, -1) @ d_o)
    dk_in = torch.matmul(v, d_kv.transpose(-2, -1))
    dk_in += d_scores.transpose(-2, -1) @ q_in
    # dL/dg_r = sum of dL/dG_t over t >= r: inside the chunk, then the
    # totals of the chunks after it.
    dG = _cumsum_rows_(
        torch.addcmul(q_in * dq_in, k_in, dk_in, value=-1), True
    )
    totals = dG[..., 0, :]
    later = totals.flip(2).cumsum(2).flip(2) - totals
    dG += later.unsqueeze(-2)
    return dq_in.mul_(decay), dk_in.div_(decay), dv, dG


class _ChunkLayout:
    """Sequences (B, H, T, d) <-> chunks (D B, H, n, L, d), n = ceil(T / L):
    with D = 2 (``both_directions``) the reversed sequences follow the
    forward ones along the batch. Padding is zero tokens (with zero
    log-gates), after the forward sequences and before the reversed ones,
    where they change no output of a causal scan."""

    def __init__(self, T, L, both_directions, device):
        self.T, self.L, self.both_directions = T, L, both_directions
        self.n = -(-T // L)
        self.pad = self.n * L - T
        self.reverse = torch.arange(T - 1, -1, -1, device=device)

    def to_chunks(self, forward, backward=None, scale=None):
        """``forward`` (and, for the reversed half, ``backward``, which
        defaults to ``forward``) as chunks, times ``scale`` if given."""
        B, H, T, d = forward.shape
        D = 1 + self.both_directions
        buf = forward.new_empty(D, B, H, self.n * self.L, d)
        if scale is None:
            buf[0, :, :, :T] = forward
        else:
            torch.mul(forward, scale, out=buf[0, :, :, :T])
        buf[0, :, :, T:] = 0
        if self.both_directions:
            if backward is None:
                backward = buf[0, :, :, :T]
            elif scale is not None:
                backward = backward * scale
            torch.index_select(
                backward, 2, self.reverse, out=buf[1, :, :, self.pad :]
            )
            buf[1, :, :, : self.pad] = 0
        return buf.flatten(0, 1).unflatten(2, (self.n, self.L))

    def to_sequences(self, chunks, combine=True):
        """Chunks back to (B, H, T, d): the forward part, and with both
        directions the reversed part put back in order, summed with it
        (``combine``) or returned as a second tensor."""
        x = chunks.flatten(2, 3)
        if not self.both_directions:
            return x[:, :, : self.T]
        forward, backward = x.chunk(2)
        backward = torch.index_select(
            backward[:, :, self.pad :], 2, self.reverse
        )
        forward = forward[:, :, : self.T]
        return backward.add_(forward) if combine else (forward, backward)


def _spans_fit(g_chunks):
    """Whether no chunk's log-gates after its first token sum below
    ``-MAX_CHUNK_LOG_DECAY``."""
    return not g_chunks[..., 1:, :].sum(-2).min() < -MAX_CHUNK_LOG_DECAY


class _ChunkedGLA(torch.autograd.Function):
    """Causal GLA (``g_bwd`` None) or the sum of a forward scan and a scan of
    the reversed sequence with gates ``g_bwd``, on upcast (B, H, T, d)
    tensors, queries times ``scale``.

    The chunk size is ``chunk_size``, halved until no chunk spans more than
    ``MAX_CHUNK_LOG_DECAY`` of log-decay (at 1 it spans none): ordinary
    gates keep ``chunk_size``; only near-zero decays (log-gates far below -1
    per token) need smaller chunks. The backward is written out (first order
    only).
    """

    @staticmethod
    def forward(ctx, q, k, v, g_fwd, g_bwd, scale, chunk_size):
        both = g_bwd is not None
        L = chunk_size
        while True:
            layout = _ChunkLayout(q.shape[2], L, both, q.device)
            g = layout.to_chunks(g_fwd, g_bwd)
            if L == 1 or _spans_fit(g):
                break
            L //= 2
        o, saved = _chunk_forward_(
            layout.to_chunks(q, scale=scale),
            layout.to_chunks(k),
            layout.to_chunks(v),
            g,
        )
        ctx.save_for_backward(*saved)
        ctx.layout, ctx.scale = layout, scale
        return layout.to_sequences(o)

    @staticmethod
    def backward(ctx, d_o):
        layout = ctx.layout
        dq, dk, dv, dg = (
            layout.to_sequences(t, combine)
            for t, combine in zip(
                _chunk_backward(layout.to_chunks(d_o), *ctx.saved_tensors),
                (True, True, True, False),
            )
        )
        dg_fwd, dg_bwd = dg if layout.both_directions else (dg, None)
        return dq.mul_(ctx.scale), dk, dv, dg_fwd, dg_bwd, None, None


def _chunked_scan(q, k, v, g_fwd, g_bwd, scale, chunk_size):
    """:class:`_ChunkedGLA` with the chunk size checked."""
    if chunk_size < 1 or chunk_size & (chunk_size - 1):
        raise ValueError(
            f'chunk_size must be a power of two, got {chunk_size}.'
        )
    return _ChunkedGLA.apply(q, k, v, g_fwd, g_bwd, scale, chunk_size)


def gla_chunked(q, k, v, g, scale=None, chunk_size=64):
    """Causal GLA, chunked: the same function as :func:`gla_recurrent`.

    The sequence is cut into chunks of L = ``chunk_size`` tokens (the last
    one zero-padded). Inside a chunk the causal scores are one L x L matmul
    of queries and keys rescaled by their decays from the chunk's first
    token; across chunks a d_k x d_v state is passed, one step per chunk
    (see ``_chunk_forward_``). Where the gates decay by more than
    exp(-``MAX_CHUNK_LOG_DECAY``) within a chunk, L is halved until they do
    not (down to 1, the recurrence itself), so any gate <= 0 is safe. The
    backward is written out (first order only; dg from ``q * dq - k * dk``).
    Time O(T (L d + d^2)), memory O(T (L + d + d^2 / L)) per head, states in
    at least fp32.

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
        o = _chunked_scan(q, k, v, g, None, scale, chunk_size)
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
        o = _chunked_scan(q, k, v, g_fwd, g_bwd, scale / 2, chunk_size)
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
