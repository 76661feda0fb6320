"""Data layout of the chunked GLA scan (:mod:`.chunk`): which tokens each
step reads and writes, the buffers it works in and the decays of its
chunks."""

from typing import NamedTuple

import torch

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
