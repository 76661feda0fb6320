"""Chunked GLA in PyTorch: the scans over groups of chunks with their
written-out backward, the autograd Function, and the causal and
bidirectional ops built on it (docs/operators.md, GLA)."""

import torch
from torch import Tensor

from ..common.precision import fp32_accumulation
from .naive import (
    bidirectional_gla_traceable,
    causal_gla_traceable,
    check_shapes,
    default_scale,
)
from .workspace import ChunkGroups, Workspace, row_sums, zero_sequences

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
