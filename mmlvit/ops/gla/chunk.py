"""Chunked GLA in PyTorch (``backend='torch'``): scans over groups of
chunks, their layout, written-out backward and autograd Function."""

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

# Elements of one step's buffer: groups of chunks small enough for cache.
GROUP_ELEMENTS = 2**18


class ChunkGroups:
    """Which tokens each step of a chunked scan reads and writes: chunks of L
    tokens in G groups of c, zero-padded; step i's (D, B, H, c L, d) buffers
    hold region i and, with D = 2, region G - 1 - i reversed."""

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
        """Fill ``out`` (D, B, H, c L, d) with the step's tokens."""
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
        """Add ``values`` (D, B, H, c L, d) to the step's tokens."""
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
    """Zeros (B, H, T, d) like ``like``, laid out (T, B, H, d)."""
    B, H, T, _ = like.shape
    return like.new_zeros(T, B, H, d).permute(1, 2, 0, 3)


class ChunkDecays(NamedTuple):
    """Decays of a step's chunks, (M, d_k, 1): exp(b_0), exp(b_last - b_0),
    exp(b_last); ``min_log_span`` the smallest b_last - b_0."""

    entering_to_first: torch.Tensor
    first_to_last: torch.Tensor
    entering_to_last: torch.Tensor
    min_log_span: torch.Tensor


def chunk_decays(g, within, out):
    """Decays of chunks with log-gates ``g`` (M, L, d_k); ``out`` (M, L, d_k)
    set to exp(b - b_0), which makes the intra-chunk scores one matmul."""
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
    """(L, L) 0/1 matrix summing rows 1..i (``reverse``: i..L-1)."""
    ones = like.new_ones(L, L)
    if reverse:
        return ones.triu_()
    ones = ones.tril_()
    ones[:, 0] = 0
    return ones


class Workspace:
    """Buffers of one scan step, allocated once a pass: (D, B, H, c L, d)
    tokens, (N c, L, d) chunk views, (N, c, d_k, d_v) states."""

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
        """The step's scaled, decayed tokens; returns :class:`ChunkDecays`."""
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


# Largest log-decay a chunk spans: keys grow by up to exp(40) (fp32 safe).
MAX_CHUNK_LOG_DECAY = 40.0


def scan_states(updates, decays, carry, out, reverse=False):
    """``S_{j+1} = decays_j S_j + updates_j`` from ``carry`` (N, d_k, d_v);
    the states entering each chunk go to ``out`` (N, c, d_k, d_v)."""
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
    """Both scans (or the causal one): o (B, H, T, d_v), the states entering
    each chunk (G, N, c, d_k, d_v) or None, the smallest -R of any chunk."""
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
    """dq, dk, dv, dg_fwd, dg_bwd of :func:`scan_forward`. Gates enter only
    through ``exp(G_t - G_s)``: ``dL/dG = q dq - k dk`` (as in fla)."""
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
    """Causal GLA (``g_bwd`` None) or both scans' sum, on upcast (B, H, T,
    d) tensors; chunks halved until none spans over ``MAX_CHUNK_LOG_DECAY``
    of log-decay. Keeps the inputs and the chunk states."""

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
    """:class:`ChunkedGLAFunction`, states kept only for a backward."""
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
    """Causal GLA in chunks, the function of :func:`~.naive.gla_recurrent`;
    chunks halved where gates decay by over exp(-``MAX_CHUNK_LOG_DECAY``).

    Args:
        q, k, g (Tensor): (B, H, T, d_k), g the log-gates <= 0.
        v (Tensor): (B, H, T, d_v).
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
    """``(o^f + flip(o^b)) / 2`` by :func:`chunked_scan`: the torch backend
    of ``bidirectional_gla``. (B, H, T, d) in, v's dtype out."""
    if torch.compiler.is_compiling():
        # The Function loops on gate values and writes into reused buffers.
        return bidirectional_gla_traceable(q, k, v, g_fwd, g_bwd, scale)
    return chunked_scan(q, k, v, g_fwd, g_bwd, scale / 2, chunk_size)
