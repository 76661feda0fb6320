"""Triton helpers of the fused bidirectional GLA's kernels
(:mod:`.triton_kernels`, :mod:`.triton_chunk_kernels`,
:mod:`.triton_backward_kernels`; notation in :mod:`.triton_kernels`):
tile loads and stores, cumulative gates and chunk totals, products with
operands rounded to ``DT``, and the factored and exact decays of a
sub-block.

Sub-block Triton kernels of the fused bidirectional GLA
(docs/operators.md, GLA): the chunk states of both directions and the
outputs of the chunks not taken whole.

Per head, tokens are cut into chunks of BT (64) tokens and chunks into NC
sub-blocks of BC (16). The kernels take the log-gates (<= 0) as their
inclusive cumulative sums within each chunk (:func:`~.gates.within_chunks`):
``cf`` of the forward gates gf from the chunk's start, ``cb`` of the
backward gates gb from its end, fp32 (B, H, T, d_k). A span's gate sum is
a difference of two of their entries, a chunk's sum one entry, so no
kernel sums gates over tokens. Within a chunk, forwards / backwards::

    o_t = scale (q_t exp(bf_t) S^f_c + q_t exp(rb_t) S^b_c + sum_s A_ts v_s)
    A_ts = sum_c q_tc k_sc (exp(bf_t - bf_s) [s <= t]
                            + exp(rb_t - rb_s) [s >= t])

with bf_t / rb_t the gate sums over the chunk's tokens <= t / >= t and
S^f_c / S^b_c the states entering chunk c from before / after it. Both
directions share every load; the backward direction is index arithmetic,
no flipped copy. How the decays are factored (whole chunks, factored or
exact diagonal sub-blocks) is in README.md.

Tensors are (B, H, T, d) with any strides. ``DT`` is the dtype of q, k, v;
``DOT`` the dtype handed to ``tl.dot`` (``DT`` on a GPU; fp32 holding
DT-rounded values under Triton's interpreter, whose bf16 products are
wrong), so operands are rounded to ``DT`` first either way.

Whole-chunk Triton kernels of the fused bidirectional GLA, for chunks
whose gates sum to at least -WHOLE_LIMIT over the chunk in every channel
and direction (the usual case: at a gate temperature of 16, gate logits
averaging above about -15). Such a chunk's decays factor through its own
ends, exp(cf_t - cf_s) = exp(cf_t) exp(-cf_s) with cf the inclusive
cumulative gate from the chunk's start (forwards; cb from its end,
backwards): queries' factors are decays, keys' at most exp(WHOLE_LIMIT),
and every product is a (BT, BT) or (BT, d) one on tensor cores, no loop
over sub-blocks. Notation and layout as in :mod:`.triton_kernels`.

The first launch of each pass (a kernel here) writes, per chunk, which
launches take it: these kernels the chunks taken whole, the sub-block
kernels the others. Forward: ``whole`` (int32 (cdiv(V, BV), B * H, NT)) 1
for the chunks it took, 0 for the others. Backward: ``kinds`` (int32 (B *
H, NT)) one of WHOLE_CHUNK (taken here), FACTORED_DIAGONALS (every
16-token sub-block factorable) or EXACT_DIAGONALS.
"""

import triton
import triton.language as tl

from ..common.triton_math import exp

# Sizes that vary between calls are not specialised on (e.g. B = 1), so one
# compilation per dtype and head width serves every batch and length.
SIZES = ['T', 'B', 'H', 'NT']


# Largest |gate sum| over a diagonal sub-block (per channel and direction)
# for which it is factored through its ends: keys then grow by at most
# e^30 (1e13), far inside the range of fp32, bf16 and tf32 products.
FACTOR_LIMIT = tl.constexpr(30.0)


# How a chunk is taken, by the gates' sums (2 implies 1): whole (all its
# decays factored through its ends), or by sub-blocks with their diagonals
# factored, or with exact diagonals.
WHOLE_CHUNK = tl.constexpr(2)


FACTORED_DIAGONALS = tl.constexpr(1)


EXACT_DIAGONALS = tl.constexpr(0)


@triton.jit
def _tile(ptr, rows, cols, stride_t, stride_d, T, D):
    """Load ``ptr[rows, cols]`` as fp32, zero outside (T, D)."""
    mask = (rows[:, None] < T) & (cols[None, :] < D)
    offsets = rows[:, None] * stride_t + cols[None, :] * stride_d
    return tl.load(ptr + offsets, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _gate_row(ptr, row, valid, ks, stride_t, stride_d, K):
    """Row ``row`` (a scalar) of cumulative gates as fp32 (BK,), zero
    where ``valid`` (a scalar) is false or outside K."""
    mask = (ks < K) & valid
    return tl.load(ptr + row * stride_t + ks * stride_d, mask=mask, other=0.0)


@triton.jit
def _gates_tile(
    ptr, rows, ks, stride_t, stride_d, T, K, FROM_START: tl.constexpr
):
    """Cumulative gates at ``rows``, (rows, BK) fp32: cf (``FROM_START``)
    or cb. Past T the gates count as 0: cf keeps its last token's value
    (so exp(-cf) stays finite where the tokens are 0), cb is 0. That value
    goes in by a select after the load, not by clamped rows (which make
    every element its own load) nor by the load's mask alone, even where
    the values past T do not matter: compiled (sm_90, bf16), the kernels
    then convert fewer layouts where these tiles' exponentials meet the
    products' operands (the whole-chunk dv 1,504 instructions a warp and
    179 registers; 2,384, 255 and a spill with masked loads alone).
    """
    tile = _tile(ptr, rows, ks, stride_t, stride_d, T, K)
    if FROM_START:
        last = _gate_row(ptr, T - 1, True, ks, stride_t, stride_d, K)
        return tl.where(rows[:, None] < T, tile, last[None, :])
    return tl.where(rows[:, None] < T, tile, 0.0)


@triton.jit
def _chunk_totals(cf, cb, i_c, ks, sft, sfd, sgt, sgd, T, K, BT: tl.constexpr):
    """Gate sums (BK,) of chunk ``i_c``, forwards and backwards: cf at its
    last token, cb at its first."""
    last = tl.minimum(i_c * BT + BT, T) - 1
    tf = _gate_row(cf, last, True, ks, sft, sfd, K)
    return tf, _gate_row(cb, i_c * BT, True, ks, sgt, sgd, K)


@triton.jit
def _block_gates(
    cf, cb, start, j, ks, sft, sfd, sgt, sgd, T, K,
    BC: tl.constexpr, NC: tl.constexpr,
):  # fmt: skip
    """Sub-block ``j`` of the chunk starting at token ``start``: its
    inclusive cumulative gates within it, forwards and backwards (BC, BK),
    their sums (BK,), and the chunk's gf summed before it and gb after it
    (BK,), which they are the chunk's less: cf_j, tf_j, cb_j, tb_j,
    before, after."""
    first = start + j * BC
    rows = first + tl.arange(0, BC)
    before = _gate_row(cf, tl.minimum(first, T) - 1, j > 0, ks, sft, sfd, K)
    end = tl.minimum(first + BC, T) - 1
    tf = _gate_row(cf, end, True, ks, sft, sfd, K)
    beyond = (first + BC < T) & (j < NC - 1)
    after = _gate_row(cb, first + BC, beyond, ks, sgt, sgd, K)
    tb = _gate_row(cb, first, first < T, ks, sgt, sgd, K)
    cf_j = _gates_tile(cf, rows, ks, sft, sfd, T, K, True) - before[None, :]
    cb_j = _gates_tile(cb, rows, ks, sgt, sgd, T, K, False) - after[None, :]
    return cf_j, tf - before, cb_j, tb - after, before, after


@triton.jit
def _chunk_state(ptr, direction, i_bh, i_c, B, H, NT, ks, vs, K, V):
    """The (BK, BV) tile ``ptr[direction, i_bh, i_c]`` of a (2, B * H, NT,
    K, V) buffer of chunk states (in ``DT``, an operand of products only),
    zero outside (K, V)."""
    index = (direction * B * H + i_bh).to(tl.int64) * NT + i_c
    offsets = index * K * V + ks[:, None] * V + vs[None, :]
    mask = (ks[:, None] < K) & (vs[None, :] < V)
    return tl.load(ptr + offsets, mask=mask, other=0.0)


@triton.jit
def _put(ptr, x, rows, cols, stride_t, stride_d, T, D):
    """Store ``x`` to ``ptr[rows, cols]`` inside (T, D)."""
    mask = (rows[:, None] < T) & (cols[None, :] < D)
    offsets = rows[:, None] * stride_t + cols[None, :] * stride_d
    tl.store(ptr + offsets, x.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _mm(a, b, DT: tl.constexpr, DOT: tl.constexpr):
    """``a @ b`` with both operands rounded to DT, accumulated in fp32."""
    return tl.dot(a.to(DT).to(DOT), b.to(DT).to(DOT), out_dtype=tl.float32)


@triton.jit
def _mm_wide(a, b, DT: tl.constexpr, DOT: tl.constexpr):
    """:func:`_mm` for the factored diagonal sub-blocks, whose key factors
    reach e^FACTOR_LIMIT: fp16 inputs multiply as tf32 (fp16's mantissa,
    fp32's range), bf16 and fp32 ones as :func:`_mm` (fp32's range
    already; rounded to bf16 like the off-diagonal sub-blocks' products)."""
    if DT == tl.float16:
        return tl.dot(a, b, input_precision='tf32', out_dtype=tl.float32)
    return _mm(a, b, DT, DOT)


@triton.jit
def _triangles(BC: tl.constexpr):
    """(BC, BC) masks [query t, key s] of s <= t and s >= t."""
    sub = tl.arange(0, BC)
    return sub[None, :] <= sub[:, None], sub[None, :] >= sub[:, None]


@triton.jit
def _factorable(tf, tb):
    """Whether diagonal sub-blocks with gate totals ``tf``, ``tb`` (BK,),
    or (NC, BK) for a chunk's NC sub-blocks, are all factored through their
    ends (:data:`FACTOR_LIMIT`): a scalar, the same for the whole
    program."""
    return tl.min(tl.minimum(tf, tb)) >= -FACTOR_LIMIT


@triton.jit
def _decay_to_end(c, total):
    """exp(total - c), (rows, BK): the decay from each token to the far end
    of its span, with ``c`` the inclusive cumulative gates from the near
    end and ``total`` (BK,) their sum (clamped at 0 against rounding)."""
    return exp(tl.minimum(total[None, :] - c, 0.0))


@triton.jit
def _factored_direction_scores(
    q, k, c, mask, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """One direction's part of A_ts over a factorable span, (rows, rows)
    fp32, zero outside ``mask``: q_t k_s exp(c_t - c_s) as one product of
    q exp(c) and k exp(-c), with ``c`` the direction's inclusive
    cumulative gates from the span's near end."""
    return _masked_scores(q * exp(c), k * exp(-c), mask, DT, DOT)


@triton.jit
def _masked_scores(
    queries, keys, mask, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """queries keys^T (:func:`_mm_wide`), (rows, rows) fp32, zero outside
    ``mask``: the scores of decayed queries and keys."""
    return tl.where(mask, _mm_wide(queries, tl.trans(keys), DT, DOT), 0.0)


@triton.jit
def _factored_scores(
    q, k, cf, cb, BC: tl.constexpr, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """A_ts of one :func:`_factorable` sub-block, (BC, BC) fp32:
    exp(cf_t - cf_s) for s <= t, exp(cb_t - cb_s) for s >= t (both at s =
    t), each direction by :func:`_factored_direction_scores`. ``q``,
    ``k``, ``cf``, ``cb``: (BC, BK) as in :func:`_diagonal_decays`."""
    lower, upper = _triangles(BC)
    a = _factored_direction_scores(q, k, cf, lower, DT, DOT)
    return a + _factored_direction_scores(q, k, cb, upper, DT, DOT)


@triton.jit
def _factored_query_grad(
    da, k, c, mask, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """dq of the (query, key) pairs in ``mask`` through one direction of a
    factorable span, (rows, BK): exp(c) (da_mask (k exp(-c))), with ``da``
    = scale do v^T (rows, rows) and ``c`` the direction's inclusive
    cumulative gates from the span's near end (cf, or cb backwards)."""
    dq = _mm_wide(tl.where(mask, da, 0.0), k * exp(-c), DT, DOT)
    return dq * exp(c)


@triton.jit
def _factored_key_grad(
    da, q, c, mask, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """dk of the pairs in ``mask``, as :func:`_factored_query_grad`:
    exp(-c) (:func:`_key_pair_sums`)."""
    return _key_pair_sums(da, q, c, mask, DT, DOT) * exp(-c)


@triton.jit
def _key_pair_sums(
    da, q, c, mask, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """da_mask^T (q exp(c)), (rows, BK): dk of the pairs in ``mask``
    before the keys' factor exp(-c)."""
    da = tl.trans(tl.where(mask, da, 0.0))
    return _mm_wide(da, q * exp(c), DT, DOT)


@triton.jit
def _diagonal_decays(cf, cb, BC: tl.constexpr):
    """Exact decays between the tokens of one sub-block, (BC, BC, BK)
    indexed [query t, key s, channel]: exp(cf_t - cf_s) (gf over (s, t])
    for s < t, exp(cb_t - cb_s) (gb over [t, s)) for s > t, 1 for s = t.
    ``cf`` / ``cb``: (BC, BK) inclusive cumulative gates, forwards /
    backwards."""
    t = tl.arange(0, BC)[:, None, None]
    s = tl.arange(0, BC)[None, :, None]
    forward = cf[:, None, :] - cf[None, :, :]
    backward = cb[:, None, :] - cb[None, :, :]
    return exp(tl.where(s < t, forward, tl.where(s > t, backward, 0.0)))


@triton.jit
def _diagonal_scores(q, k, decays, BC: tl.constexpr):
    """A_ts of one sub-block, (BC, BC) fp32: sum_c q_tc k_sc decays_tsc,
    doubled at s = t (both directions count a token's own key)."""
    a = tl.sum(q[:, None, :] * k[None, :, :] * decays, 2)
    sub = tl.arange(0, BC)
    return tl.where(sub[:, None] == sub[None, :], 2.0 * a, a)


@triton.jit
def _base(ptr, i_b, i_h, stride_b, stride_h):
    return ptr + i_b.to(tl.int64) * stride_b + i_h.to(tl.int64) * stride_h


# Largest |gate sum| over a chunk (per channel and direction) for which it
# is taken whole: its keys' factors then reach e^60 (1e26), and the
# products' operands (bf16, or tf32 / fp32, both with fp32's range of
# 3e38) hold keys up to 3e12 in magnitude; each entry kept is a sum of
# terms q_t k_s exp(cf_t - cf_s) <= |q_t k_s|. Twice the diagonal
# sub-blocks' FACTOR_LIMIT: a strongly gated channel sends its chunk to the
# sub-block kernels only where its gates sum below -60, not -30.
WHOLE_LIMIT = tl.constexpr(60.0)


@triton.jit
def _chunk_gates(
    cum_f, cum_b, i_c, ks, sft, sfd, sgt, sgd, T, K, BT: tl.constexpr
):  # fmt: skip
    """cf, cb (BT, BK): chunk ``i_c``'s inclusive cumulative gates from its
    start and from its end; tf, tb (BK,): their sums."""
    rows = i_c * BT + tl.arange(0, BT)
    cf = _gates_tile(cum_f, rows, ks, sft, sfd, T, K, True)
    cb = _gates_tile(cum_b, rows, ks, sgt, sgd, T, K, False)
    tf, tb = _chunk_totals(cum_f, cum_b, i_c, ks, sft, sfd, sgt, sgd, T, K, BT)
    return cf, cb, tf, tb


@triton.jit
def _whole(tf, tb):
    """Whether a chunk with gate totals ``tf``, ``tb`` (BK,) is taken
    whole (:data:`WHOLE_LIMIT`): a scalar, the same for the program."""
    return tl.min(tl.minimum(tf, tb)) >= -WHOLE_LIMIT
