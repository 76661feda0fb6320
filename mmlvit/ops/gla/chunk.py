"""Chunked GLA in PyTorch: the scans over groups of chunks with their
written-out backward, the autograd Function, and the causal and
bidirectional ops built on it (docs/operators.md, GLA).

Data layout of the chunked GLA scan (:mod:`.chunk`): which tokens each
step reads and writes, the buffers it works in and the decays of its
chunks.
"""

from typing import NamedTuple

import torch
from torch import Tensor

from ..common.precision import fp32_accumulation
from .naive import (
    bidirectional_gla_traceable,
    causal_gla_traceable,
    check_shapes,
    default_scale,
)

# Elements of one workspace (the q, k, v, ... of a scan step): the scans work
# on a group of chunks at a time, in buffers allocated once per call and
# small enough to stay in cache, and carry the state from group to group.
GROUP_ELEMENTS = 2**18


class ChunkGroups:
    """Which tokens each step of a chunked scan reads and writes.

    The T tokens are cut into chunks of L and the chunks into G groups of c,
    zero tokens (with zero log-gates) padding the sequence to G c L; region
    r holds tokens [r c L, (r + 1) c L). Step i works on workspaces
    (D, B, H, c L, d): [0] holds region i and, with D = 2
    (``both_directions``), [1] holds region G - 1 - i with its tokens
    reversed, i.e. region i of the reversed sequence, padded at its start.
    The padding follows the real tokens in either direction, so it changes
    no output of a causal scan.

    Args:
        shape (tuple): (B, H, T, d) of the queries.
        L (int): Tokens per chunk.
        both_directions (bool): Whether the reversed sequence is scanned
            too.
        device (torch.device): Device of the index tensors.
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


def zero_sequences(like, d):
    """Zeros (B, H, T, d) like ``like`` (B, H, T, _), laid out (T, B, H, d)
    in memory: the token ranges the scans write are contiguous blocks (for
    B = 1 the layout is also the (B, T, H * d) one of the projections)."""
    B, H, T, _ = like.shape
    return like.new_zeros(T, B, H, d).permute(1, 2, 0, 3)


class ChunkDecays(NamedTuple):
    """Decays of the M chunks of a step, with b the cumulative log-gate
    inside a chunk (b_0 at its first token, b_last at its last): the state
    entering a chunk is the one after the previous chunk's last token.

    Attributes:
        entering_to_first (Tensor): exp(b_0), (M, d_k, 1): decays the
            entering state to the chunk's first token.
        first_to_last (Tensor): exp(b_last - b_0) = exp(-R), (M, d_k, 1):
            decays keys scaled to the first token (divided by
            exp(b - b_0)) to the last token.
        entering_to_last (Tensor): exp(b_last), (M, d_k, 1): decays the
            entering state across the whole chunk.
        min_log_span (Tensor): The smallest b_last - b_0 = -R of any chunk
            and channel, a scalar: R is the log-decay a chunk spans after
            its first token.
    """

    entering_to_first: torch.Tensor
    first_to_last: torch.Tensor
    entering_to_last: torch.Tensor
    min_log_span: torch.Tensor


def chunk_decays(g, within, out):
    """Decays of a group of chunks from its log-gates.

    With b the cumulative log-gate inside a chunk and b_0 its value at the
    chunk's first token, every decay inside the chunk factorises as
    ``exp(b_i - b_j) = exp(b_i - b_0) / exp(b_j - b_0)``: queries times
    ``out`` = exp(b - b_0), in [exp(-R), 1], and keys divided by it give
    the intra-chunk scores in one matmul, R = b_0 - b_last the log-decay
    the chunk spans after its first token.

    Args:
        g (Tensor): Log-gates (M, L, d_k), M = N c chunks.
        within (Tensor): (M, L, L), ``within[:, i, j] = 1`` for
            1 <= j <= i, else 0 (so ``within @ g`` = b - b_0).
        out (Tensor): (M, L, d_k) buffer, set to exp(b - b_0).

    Returns:
        ChunkDecays: The per-chunk decays.
    """
    torch.bmm(within, g, out=out)
    log_span = out[:, -1:]  # b_last - b_0 = -R
    b_first = g[:, :1]
    entering_to_first, first_to_last = b_first.exp(), log_span.exp()
    entering_to_last = (b_first + log_span).exp_()
    min_log_span = log_span.amin()
    out.exp_()
    return ChunkDecays(
        entering_to_first.mT,
        first_to_last.mT,
        entering_to_last.mT,
        min_log_span,
    )


def row_sums(L, like, reverse=False):
    """(L, L) 0/1 matrix whose product with L rows x gives, in row i,
    x_1 + ... + x_i (``reverse``: x_i + ... + x_{L-1})."""
    ones = like.new_ones(L, L)
    if reverse:
        return ones.triu_()
    ones = ones.tril_()
    ones[:, 0] = 0
    return ones


class Workspace:
    """The buffers of one scan step, allocated once per pass and reused by
    every step: (D, B, H, c L, d) token buffers, their (N c, L, d) chunk
    views (N = D B H) and (N, c, d_k, d_v) per-chunk states. Holds the
    step's decayed queries and keys, values, log-gates and decays
    (:meth:`load`).

    Args:
        groups (ChunkGroups): The scan's layout.
        like (Tensor): The queries (B, H, T, d_k), for dtype and device.
        d_v (int): Value width.
    """

    def __init__(self, groups, like, d_v):
        B, H, _, d_k = like.shape
        self.groups, self.like = groups, like
        self.N = groups.D * B * H
        self.M = self.N * groups.c  # chunks per step
        L = groups.L
        self.within = row_sums(L, like).expand(self.M, L, L)
        self.q, self.k, self.g, self.decay = (
            self.tokens(d_k) for _ in range(4)
        )
        self.v = self.tokens(d_v)

    def load(self, step, q, k, v, g_fwd, g_bwd, scale):
        """The step's tokens: queries times ``scale`` and ``decay``, keys
        divided by ``decay``, values and log-gates.

        Returns:
            ChunkDecays: The decays of the step's chunks (see
            :func:`chunk_decays`).
        """
        gather = self.groups.gather
        gather(self.q, step, q).mul_(scale)
        gather(self.k, step, k)
        gather(self.v, step, v)
        gather(self.g, step, g_fwd, g_bwd)
        decays = chunk_decays(
            self.chunks(self.g), self.within, self.chunks(self.decay)
        )
        self.q.mul_(self.decay)
        self.k.div_(self.decay)
        return decays

    def tokens(self, d):
        """An uninitialised (D, B, H, c L, d) token buffer."""
        g = self.groups
        return self.like.new_empty(g.D, *self.like.shape[:2], g.span, d)

    def chunks(self, x):
        """(D, B, H, c L, d) or (N, c, L, d) -> (N c, L, d)."""
        return x.view(self.M, -1, x.shape[-1])

    def states(self, d_k, d_v):
        """An uninitialised (N, c, d_k, d_v) buffer of per-chunk states."""
        return self.like.new_empty(self.N, self.groups.c, d_k, d_v)

    def per_chunk(self, x):
        """(N c, ...) -> (N, c, ...)."""
        return x.view(self.N, self.groups.c, *x.shape[1:])


# Largest log-decay one chunk may span after its first token (see
# ``workspace.chunk_decays``): keys grown by up to exp(40) and queries shrunk
# by as much stay far from fp32's overflow (exp(88)) and underflow
# (exp(-103)).
MAX_CHUNK_LOG_DECAY = 40.0


def scan_states(updates, decays, carry, out, reverse=False):
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


def scan_forward(groups, q, k, v, g_fwd, g_bwd, scale, keep_states):
    """Both scans (or the causal one), step by step over the groups.

    Args:
        groups (ChunkGroups): The layout.
        q, k, g_fwd (Tensor): (B, H, T, d_k); ``g_bwd`` the same or None.
        v (Tensor): (B, H, T, d_v).
        scale (float): Query scale.
        keep_states (bool): Whether to return the chunk states.

    Returns:
        tuple: o (B, H, T, d_v), the states entering every chunk decayed to
        its first token (G, N, c, d_k, d_v) for the backward (None unless
        ``keep_states``), and the smallest -R of any chunk (see
        :class:`~.workspace.ChunkDecays`).
    """
    d_k, d_v = q.shape[-1], v.shape[-1]
    ws = Workspace(groups, q, d_v)
    o_in = ws.tokens(d_v)
    q3, k3, v3, o3 = map(ws.chunks, (ws.q, ws.k, ws.v, o_in))
    scores = q.new_empty(ws.M, groups.L, groups.L)
    summaries = ws.states(d_k, d_v)
    states = q.new_empty(groups.G if keep_states else 1, *summaries.shape)
    carry = q.new_zeros(ws.N, d_k, d_v)
    o = zero_sequences(q, d_v)
    min_log_span = q.new_zeros(())
    for step in range(groups.G):
        decays = ws.load(step, q, k, v, g_fwd, g_bwd, scale)
        min_log_span = torch.minimum(min_log_span, decays.min_log_span)
        torch.bmm(q3, k3.mT, out=scores).tril_()
        # Chunk summaries, keys decayed to the chunk's last token.
        summaries3 = ws.chunks(summaries)
        torch.bmm(k3.mT, v3, out=summaries3).mul_(decays.first_to_last)
        entering = states[step if keep_states else 0]
        scan_states(
            summaries, ws.per_chunk(decays.entering_to_last), carry, entering
        )
        # The entering states decayed to the chunk's first token.
        entering3 = ws.chunks(entering).mul_(decays.entering_to_first)
        torch.bmm(q3, entering3, out=o3).baddbmm_(scores, v3)
        groups.scatter(o_in, step, o)
    return o, states if keep_states else None, min_log_span


def scan_backward(groups, d_o, q, k, v, g_fwd, g_bwd, states, scale):
    """Gradients of q, k, v, g_fwd, g_bwd of :func:`scan_forward`, steps in
    reverse order, the decayed queries and keys and the intra-chunk scores
    recomputed.

    The log-gates enter only through decays ``exp(G_t - G_s)`` with
    G = cumsum(g) over the sequence, so ``dL/dG_t = q_t * dq_t - k_t * dk_t``
    (= ``q_in * dq_in - k_in * dk_in``) and dg is its reverse cumulative sum
    (as in fla's kernels): no graph through the decays is needed.

    Args:
        groups (ChunkGroups): The layout of the forward.
        d_o (Tensor): dL/do, (B, H, T, d_v).
        q, k, v, g_fwd, g_bwd, scale: The forward's inputs.
        states (Tensor): The forward's chunk states (G, N, c, d_k, d_v).

    Returns:
        tuple: dq, dk (B, H, T, d_k), dv (B, H, T, d_v), dg_fwd and dg_bwd
        (B, H, T, d_k; dg_bwd None when ``g_bwd`` is).
    """
    d_k, d_v = q.shape[-1], v.shape[-1]
    ws = Workspace(groups, q, d_v)
    dq_in, dk_in, dg_in = (ws.tokens(d_k) for _ in range(3))
    do_in, dv_in = ws.tokens(d_v), ws.tokens(d_v)
    q3, k3, v3, g3 = map(ws.chunks, (ws.q, ws.k, ws.v, ws.g))
    dq3, dk3, dg3, do3, dv3 = map(
        ws.chunks, (dq_in, dk_in, dg_in, do_in, dv_in)
    )
    L = groups.L
    after = row_sums(L, q, reverse=True).expand(ws.M, L, L)
    scores = q.new_empty(ws.M, groups.L, groups.L)
    d_entering, d_leaving = ws.states(d_k, d_v), ws.states(d_k, d_v)
    d_carry = q.new_zeros(ws.N, d_k, d_v)
    later = q.new_zeros(ws.N, 1, 1, d_k)  # dL/dG over later chunks
    dq, dk, dg_fwd = (zero_sequences(q, d_k) for _ in range(3))
    dv = zero_sequences(q, d_v)
    dg_bwd = None if g_bwd is None else zero_sequences(q, d_k)
    for step in reversed(range(groups.G)):
        decays = ws.load(step, q, k, v, g_fwd, g_bwd, scale)
        groups.gather(do_in, step, d_o)
        # Through the states: d_leaving[:, j] = dL/dS for the state leaving
        # chunk j, the gradient of its summary.
        d_entering3 = ws.chunks(d_entering)
        torch.bmm(q3.mT, do3, out=d_entering3).mul_(decays.entering_to_first)
        across = ws.per_chunk(decays.entering_to_last)
        scan_states(d_entering, across, d_carry, d_leaving, reverse=True)
        d_kv = ws.chunks(d_leaving).mul_(decays.first_to_last)
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


class ChunkedGLAFunction(torch.autograd.Function):
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
            groups = ChunkGroups(q.shape, L, both, q.device)
            o, states, min_log_span = scan_forward(
                groups, q, k, v, g_fwd, g_bwd, scale, keep_states
            )
            if L == 1 or min_log_span >= -MAX_CHUNK_LOG_DECAY:
                break
            L //= 2
        ctx.save_for_backward(q, k, v, g_fwd, g_bwd, states)
        ctx.groups, ctx.scale = groups, scale
        return o

    @staticmethod
    def backward(ctx, d_o):
        grads = scan_backward(
            ctx.groups, d_o, *ctx.saved_tensors, scale=ctx.scale
        )
        return *grads, None, None, None


def chunked_scan(q, k, v, g_fwd, g_bwd, scale, chunk_size):
    """:class:`ChunkedGLAFunction` with the chunk size checked; the states
    are kept for a backward only where one can follow. Shapes as
    :func:`scan_forward`."""
    if chunk_size < 1 or chunk_size & (chunk_size - 1):
        raise ValueError(
            f'chunk_size must be a power of two, got {chunk_size}.'
        )
    inputs = [t for t in (q, k, v, g_fwd, g_bwd) if t is not None]
    differentiable = torch.is_grad_enabled() and any(
        t.requires_grad for t in inputs
    )
    return ChunkedGLAFunction.apply(
        q, k, v, g_fwd, g_bwd, scale, chunk_size, differentiable
    )


@fp32_accumulation(result_dtype_of='v')
def gla_chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    scale: float | None = None,
    chunk_size: int = 64,
) -> Tensor:
    """Causal GLA, chunked: the same function as
    :func:`~.naive.gla_recurrent`.

    The sequence is cut into chunks of L = ``chunk_size`` tokens (the last
    one zero-padded). Inside a chunk the causal scores are one L x L matmul
    of queries and keys rescaled by their decays from the chunk's first
    token; across chunks a d_k x d_v state is passed, one step per chunk
    (see ``workspace.chunk_decays`` and :func:`scan_forward`). Where the
    gates decay by more than exp(-``MAX_CHUNK_LOG_DECAY``) within a chunk,
    L is halved until they do not (down to 1, the recurrence itself), so
    any gate <= 0 is safe. The chunks are processed a group at a time in
    small reused buffers; the backward is written out (first order only; dg
    from ``q * dq - k * dk``) and recomputes the intra-chunk terms, so only
    the inputs and the states entering each chunk are kept. Time
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
    check_shapes(q, k, v, g)
    scale = default_scale(q, scale)
    if torch.compiler.is_compiling():
        return causal_gla_traceable(q, k, v, g, scale)
    return chunked_scan(q, k, v, g, None, scale, chunk_size)


@fp32_accumulation(result_dtype_of='v')
def bidirectional_gla_chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g_fwd: Tensor,
    g_bwd: Tensor,
    scale: float,
    chunk_size: int,
) -> Tensor:
    """``(o^f + flip(o^b)) / 2`` by :func:`chunked_scan`, both directions
    in one call (the torch backend of ``bidirectional_gla``, which checks
    the shapes and resolves ``scale``).

    Args:
        q, k (Tensor): (B, H, T, d_k).
        v (Tensor): (B, H, T, d_v).
        g_fwd, g_bwd (Tensor): Log-gates (B, H, T, d_k), token order.
        scale (float): Query scale.
        chunk_size (int): Tokens per chunk, a power of two.

    Returns:
        Tensor: (B, H, T, d_v) in the dtype of ``v``.
    """
    if torch.compiler.is_compiling():
        # torch.compile cannot trace ChunkedGLAFunction (it halves its chunk
        # in a loop on the gate values and writes into strided views of
        # reused buffers): the same function in plain ops, which compiles
        # with autograd's backward.
        return bidirectional_gla_traceable(q, k, v, g_fwd, g_bwd, scale)
    return chunked_scan(q, k, v, g_fwd, g_bwd, scale / 2, chunk_size)
