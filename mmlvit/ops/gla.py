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
# ``_decays_``): keys grown by up to exp(40) and queries shrunk by as much
# stay far from fp32's overflow (exp(88)) and underflow (exp(-103)).
MAX_CHUNK_LOG_DECAY = 40.0

# Elements of one workspace (the q, k, v, ... of a scan step): the scans work
# on a group of chunks at a time, in buffers allocated once per call and
# small enough to stay in cache, and carry the state from group to group.
GROUP_ELEMENTS = 2**18


class _ChunkGroups:
    """Which tokens each step of a chunked scan reads and writes.

    The T tokens are cut into chunks of L and the chunks into G groups of c,
    zero tokens (with zero log-gates) padding the sequence to G c L; region
    r holds tokens [r c L, (r + 1) c L). Step i works on workspaces
    (D, B, H, c L, d): [0] holds region i and, with D = 2
    (``both_directions``), [1] holds region G - 1 - i with its tokens
    reversed, i.e. region i of the reversed sequence, padded at its start.
    The padding follows the real tokens in either direction, so it changes
    no output of a causal scan.
    """

    def __init__(self, shape, L, both_directions, device):
        B, H, T, d = shape
        self.T, self.L, self.D = T, L, 1 + both_directions
        self.device = device
        n = -(-T // L)
        fit = GROUP_ELEMENTS // (self.D * B * H * L * d)
        self.c = max(1, min(n, fit))
        self.span = self.c * L
        self.G = -(-n // self.c)

    def region(self, step, direction):
        """Tokens [start, stop) of a step in one direction."""
        r = step if direction == 0 else self.G - 1 - step
        start = r * self.span
        return start, min(start + self.span, self.T)

    def _reversed_index(self, start, stop):
        return torch.arange(stop - 1, start - 1, -1, device=self.device)

    def gather(self, out, step, forward, backward=None):
        """Fill ``out`` (D, B, H, c L, d) with the step's tokens of
        ``forward`` (B, H, T, d) and, reversed, of ``backward`` (default
        ``forward``). Returns ``out``."""
        start, stop = self.region(step, 0)
        out[0, :, :, : stop - start] = forward[:, :, start:stop]
        out[0, :, :, stop - start :] = 0
        if self.D == 2:
            start, stop = self.region(step, 1)
            source = forward if backward is None else backward
            index = self._reversed_index(start, stop)
            pad = self.span - (stop - start)
            if pad:
                out[1, :, :, :pad] = 0
                out[1, :, :, pad:] = source.index_select(2, index)
            else:
                torch.index_select(source, 2, index, out=out[1])
        return out

    def scatter(self, values, step, forward, backward=None):
        """Add ``values`` (D, B, H, c L, d) to the step's tokens: [0] to
        ``forward`` (B, H, T, d), the reversed [1] to ``backward`` (default
        ``forward``, where the two directions sum)."""
        start, stop = self.region(step, 0)
        forward[:, :, start:stop] += values[0, :, :, : stop - start]
        if self.D == 2:
            start, stop = self.region(step, 1)
            index = self._reversed_index(start, stop)
            part = values[1, :, :, self.span - (stop - start) :]
            (forward if backward is None else backward).index_add_(
                2, index, part
            )


def _zero_sequences(like, d):
    """Zeros (B, H, T, d) like ``like`` (B, H, T, _), laid out (T, B, H, d)
    in memory: the token ranges the scans write are contiguous blocks (for
    B = 1 the layout is also the (B, T, H * d) one of the projections)."""
    B, H, T, _ = like.shape
    return like.new_zeros(T, B, H, d).permute(1, 2, 0, 3)


def _decays_(g, decay, within):
    """Decays of a group of chunks from its log-gates.

    With b the cumulative log-gate inside a chunk and b_0 its value at the
    chunk's first token, every decay inside the chunk factorises as
    ``exp(b_i - b_j) = exp(b_i - b_0) / exp(b_j - b_0)``: queries times
    ``decay`` = exp(b - b_0), in [exp(-R), 1], and keys divided by it give
    the intra-chunk scores in one matmul, R = b_0 - b_last the log-decay
    the chunk spans after its first token.

    Args:
        g (Tensor): Log-gates (M, L, d_k), M = N c chunks.
        decay (Tensor): (M, L, d_k) buffer, set to exp(b - b_0).
        within (Tensor): (M, L, L), ``within[:, i, j] = 1`` for
            1 <= j <= i, else 0 (so ``within @ g`` = b - b_0).

    Returns:
        tuple: ``to_first`` exp(b_0), ``to_last`` exp(-R), ``through``
        exp(b_last), each (M, d_k, 1), and the smallest -R (a scalar
        tensor).
    """
    torch.bmm(within, g, out=decay)
    span = decay[:, -1:]  # b_last - b_0 = -R
    b_first = g[:, :1]
    to_first, to_last = b_first.exp(), span.exp()
    through, smallest = (b_first + span).exp_(), span.amin()
    decay.exp_()
    return to_first.mT, to_last.mT, through.mT, smallest


def _row_sums(L, like, reverse=False):
    """(L, L) 0/1 matrix whose product with L rows x gives, in row i,
    x_1 + ... + x_i (``reverse``: x_i + ... + x_{L-1})."""
    ones = like.new_ones(L, L)
    if reverse:
        return ones.triu_()
    ones = ones.tril_()
    ones[:, 0] = 0
    return ones


def _scan_states(updates, decays, carry, out, reverse=False):
    """``S_{j+1} = decays_j * S_j + updates_j`` over the c chunks of a group
    (j descending with ``reverse``), starting from ``carry``.

    Writes the state entering each chunk (leaving it, with ``reverse``) to
    ``out`` and the state leaving the group to ``carry``.

    Args:
        updates (Tensor): (N, c, d_k, d_v).
        decays (Tensor): (N, c, d_k, 1), the decay over each chunk.
        carry (Tensor): (N, d_k, d_v), updated in place.
        out (Tensor): (N, c, d_k, d_v).
    """
    steps = range(updates.shape[1])
    steps = steps[::-1] if reverse else steps
    out[:, steps[0]] = carry
    for j, after in zip(steps, steps[1:]):
        torch.addcmul(
            updates[:, j], out[:, j], decays[:, j], out=out[:, after]
        )
    j = steps[-1]
    torch.addcmul(updates[:, j], out[:, j], decays[:, j], out=carry)


class _Workspace:
    """The buffers of one scan step, allocated once per pass and reused by
    every step: (D, B, H, c L, d) token buffers, their (N c, L, d) chunk
    views (N = D B H) and (N, c, d_k, d_v) per-chunk states. Holds the
    step's decayed queries and keys, values, log-gates and decays
    (:meth:`load`)."""

    def __init__(self, groups, like, d_v):
        B, H, _, d_k = like.shape
        self.groups, self.like = groups, like
        self.N = groups.D * B * H
        self.M = self.N * groups.c  # chunks per step
        L = groups.L
        self.within = _row_sums(L, like).expand(self.M, L, L)
        self.q, self.k, self.g, self.decay = (
            self.tokens(d_k) for _ in range(4)
        )
        self.v = self.tokens(d_v)

    def load(self, step, q, k, v, g_fwd, g_bwd, scale):
        """The step's tokens: queries times ``scale`` and ``decay``, keys
        divided by ``decay``, values and log-gates (see :func:`_decays_`,
        whose other results it returns)."""
        gather = self.groups.gather
        gather(self.q, step, q).mul_(scale)
        gather(self.k, step, k)
        gather(self.v, step, v)
        gather(self.g, step, g_fwd, g_bwd)
        decays = _decays_(
            self.chunks(self.g), self.chunks(self.decay), self.within
        )
        self.q.mul_(self.decay)
        self.k.div_(self.decay)
        return decays

    def tokens(self, d):
        g = self.groups
        return self.like.new_empty(g.D, *self.like.shape[:2], g.span, d)

    def chunks(self, x):
        """(D, B, H, c L, d) or (N, c, L, d) -> (N c, L, d)."""
        return x.view(self.M, -1, x.shape[-1])

    def states(self, d_k, d_v):
        return self.like.new_empty(self.N, self.groups.c, d_k, d_v)

    def per_chunk(self, x):
        """(N c, ...) -> (N, c, ...)."""
        return x.view(self.N, self.groups.c, *x.shape[1:])


def _scan_forward(groups, q, k, v, g_fwd, g_bwd, scale, keep_states):
    """Both scans (or the causal one), step by step over the groups.

    Returns:
        tuple: o (B, H, T, d_v), the states entering every chunk decayed to
        its first token (G, N, c, d_k, d_v) for the backward (None unless
        ``keep_states``), and the smallest -R of any chunk (see
        :func:`_decays_`).
    """
    d_k, d_v = q.shape[-1], v.shape[-1]
    ws = _Workspace(groups, q, d_v)
    o_in = ws.tokens(d_v)
    q3, k3, v3, o3 = map(ws.chunks, (ws.q, ws.k, ws.v, o_in))
    scores = q.new_empty(ws.M, groups.L, groups.L)
    summaries = ws.states(d_k, d_v)
    states = q.new_empty(groups.G if keep_states else 1, *summaries.shape)
    carry = q.new_zeros(ws.N, d_k, d_v)
    o = _zero_sequences(q, d_v)
    worst = q.new_zeros(())
    for step in range(groups.G):
        to_first, to_last, through, span = ws.load(
            step, q, k, v, g_fwd, g_bwd, scale
        )
        worst = torch.minimum(worst, span)
        torch.bmm(q3, k3.mT, out=scores).tril_()
        # Chunk summaries, keys decayed to the chunk's last token.
        summaries3 = ws.chunks(summaries)
        torch.bmm(k3.mT, v3, out=summaries3).mul_(to_last)
        entering = states[step if keep_states else 0]
        _scan_states(summaries, ws.per_chunk(through), carry, entering)
        entering3 = ws.chunks(entering).mul_(to_first)  # at the first token
        torch.bmm(q3, entering3, out=o3).baddbmm_(scores, v3)
        groups.scatter(o_in, step, o)
    return o, states if keep_states else None, worst


def _scan_backward(groups, d_o, q, k, v, g_fwd, g_bwd, states, scale):
    """Gradients of q, k, v, g_fwd, g_bwd of :func:`_scan_forward`, steps in
    reverse order, the decayed queries and keys and the intra-chunk scores
    recomputed.

    The log-gates enter only through decays ``exp(G_t - G_s)`` with
    G = cumsum(g) over the sequence, so ``dL/dG_t = q_t * dq_t - k_t * dk_t``
    (= ``q_in * dq_in - k_in * dk_in``) and dg is its reverse cumulative sum
    (as in fla's kernels): no graph through the decays is needed.
    """
    d_k, d_v = q.shape[-1], v.shape[-1]
    ws = _Workspace(groups, q, d_v)
    dq_in, dk_in, dg_in = (ws.tokens(d_k) for _ in range(3))
    do_in, dv_in = ws.tokens(d_v), ws.tokens(d_v)
    q3, k3, v3, g3 = map(ws.chunks, (ws.q, ws.k, ws.v, ws.g))
    dq3, dk3, dg3, do3, dv3 = map(
        ws.chunks, (dq_in, dk_in, dg_in, do_in, dv_in)
    )
    L = groups.L
    after = _row_sums(L, q, reverse=True).expand(ws.M, L, L)
    scores = q.new_empty(ws.M, groups.L, groups.L)
    d_entering, d_leaving = ws.states(d_k, d_v), ws.states(d_k, d_v)
    d_carry = q.new_zeros(ws.N, d_k, d_v)
    later = q.new_zeros(ws.N, 1, 1, d_k)  # dL/dG over later chunks
    dq, dk, dg_fwd = (_zero_sequences(q, d_k) for _ in range(3))
    dv = _zero_sequences(q, d_v)
    dg_bwd = None if g_bwd is None else _zero_sequences(q, d_k)
    for step in reversed(range(groups.G)):
        to_first, to_last, through, _ = ws.load(
            step, q, k, v, g_fwd, g_bwd, scale
        )
        groups.gather(do_in, step, d_o)
        # Through the states: d_leaving[:, j] = dL/dS for the state leaving
        # chunk j, the gradient of its summary.
        d_entering3 = ws.chunks(d_entering)
        torch.bmm(q3.mT, do3, out=d_entering3).mul_(to_first)
        through = ws.per_chunk(through)
        _scan_states(d_entering, through, d_carry, d_leaving, reverse=True)
        d_kv = ws.chunks(d_leaving).mul_(to_last)
        torch.bmm(q3, k3.mT, out=scores).tril_()
        torch.bmm(k3, d_kv, out=dv3).baddbmm_(scores.mT, do3)
        d_scores = torch.bmm(do3, v3.mT, out=scores).tril_()
        state3 = ws.chunks(states[step])
        torch.bmm(do3, state3.mT, out=dq3).baddbmm_(d_scores, k3)
        torch.bmm(v3, d_kv.mT, out=dk3).baddbmm_(d_scores.mT, q3)
        # dL/dg_r = sum of dL/dG_t over t >= r: inside the chunk, then the
        # totals of the chunks after it (in this group, then in later ones).
        torch.mul(ws.q, dq_in, out=ws.g).addcmul_(ws.k, dk_in, value=-1)
        totals = ws.per_chunk(torch.bmm(after, g3, out=dg3)[:, :1])
        from_later = totals.flip(1).cumsum(1).flip(1) - totals + later
        later += totals.sum(1, keepdim=True)
        ws.per_chunk(dg3).add_(from_later)
        groups.scatter(dq_in.mul_(ws.decay).mul_(scale), step, dq)
        groups.scatter(dk_in.div_(ws.decay), step, dk)
        groups.scatter(dv_in, step, dv)
        groups.scatter(dg_in, step, dg_fwd, dg_bwd)
    return dq, dk, dv, dg_fwd, dg_bwd


class _ChunkedGLA(torch.autograd.Function):
    """Causal GLA (``g_bwd`` None) or the sum of a forward scan and a scan of
    the reversed sequence with gates ``g_bwd``, on upcast (B, H, T, d)
    tensors, queries times ``scale``.

    The chunk size is ``chunk_size``, halved until no chunk spans more than
    ``MAX_CHUNK_LOG_DECAY`` of log-decay (at 1 it spans none): ordinary
    gates keep ``chunk_size``; only near-zero decays (log-gates far below -1
    per token) need smaller chunks. The backward is written out (first order
    only) and keeps only the inputs and the chunk states from the forward.
    """

    @staticmethod
    def forward(ctx, q, k, v, g_fwd, g_bwd, scale, chunk_size, keep_states):
        both = g_bwd is not None
        L = chunk_size
        while True:
            groups = _ChunkGroups(q.shape, L, both, q.device)
            o, states, worst = _scan_forward(
                groups, q, k, v, g_fwd, g_bwd, scale, keep_states
            )
            if L == 1 or worst >= -MAX_CHUNK_LOG_DECAY:
                break
            L //= 2
        ctx.save_for_backward(q, k, v, g_fwd, g_bwd, states)
        ctx.groups, ctx.scale = groups, scale
        return o

    @staticmethod
    def backward(ctx, d_o):
        grads = _scan_backward(
            ctx.groups, d_o, *ctx.saved_tensors, scale=ctx.scale
        )
        return *grads, None, None, None


def _chunked_scan(q, k, v, g_fwd, g_bwd, scale, chunk_size):
    """:class:`_ChunkedGLA` with the chunk size checked; the states are
    kept for a backward only where one can follow."""
    if chunk_size < 1 or chunk_size & (chunk_size - 1):
        raise ValueError(
            f'chunk_size must be a power of two, got {chunk_size}.'
        )
    inputs = [t for t in (q, k, v, g_fwd, g_bwd) if t is not None]
    differentiable = torch.is_grad_enabled() and any(
        t.requires_grad for t in inputs
    )
    return _ChunkedGLA.apply(
        q, k, v, g_fwd, g_bwd, scale, chunk_size, differentiable
    )


def gla_chunked(q, k, v, g, scale=None, chunk_size=64):
    """Causal GLA, chunked: the same function as :func:`gla_recurrent`.

    The sequence is cut into chunks of L = ``chunk_size`` tokens (the last
    one zero-padded). Inside a chunk the causal scores are one L x L matmul
    of queries and keys rescaled by their decays from the chunk's first
    token; across chunks a d_k x d_v state is passed, one step per chunk
    (see ``_decays_`` and ``_scan_forward``). Where the gates decay by more
    than exp(-``MAX_CHUNK_LOG_DECAY``) within a chunk, L is halved until
    they do not (down to 1, the recurrence itself), so any gate <= 0 is
    safe. The chunks are processed a group at a time in small reused
    buffers; the backward is written out (first order only; dg from
    ``q * dq - k * dk``) and recomputes the intra-chunk terms, so only the
    inputs and the states entering each chunk are kept. Time
    O(T (L d + d^2)), memory kept for the backward O(T d^2 / L) per head,
    states in at least fp32.

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
