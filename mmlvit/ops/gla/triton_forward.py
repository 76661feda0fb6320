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


@triton.jit(do_not_specialize=SIZES)
def chunk_states_kernel(
    x, y, g0, g1, out,
    sxb, sxh, sxt, sxd, syb, syh, syt, syd,
    s0b, s0h, s0t, s0d, s1b, s1h, s1t, s1d,
    T, B, H, NT,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr, INCLUSIVE: tl.constexpr,
    DT: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """Exclusive scans of chunk summaries in both directions.

    Direction 0 (cumulative gates ``g0``) scans chunks left to right,
    direction 1 (``g1``) right to left. Chunk c's summary is
    ``sum_t (x_t exp(e_t))^T y_t`` with e_t the log-decay from token t to
    the chunk's far end in the scan direction (token t's own gate included
    when INCLUSIVE); the carry decays by the chunk's gate sum, in fp32.
    Writes the carry entering every chunk: ``out`` (2, B, H, NT, K, V),
    rounded to its dtype.

    States (x = k, y = v, g0 = cf, g1 = cb): out[0] = S^f, out[1] = S^b,
    with e_t = tf - cf_t (gf over the chunk's tokens after t) and tb - cb_t.
    Their gradients (x = q, y = dL/do, g0 = cb, g1 = cf, INCLUSIVE):
    out[0][c] = dL/dS^b_{c-1}, out[1][c] = dL/dS^f_{c+1} (unscaled), with
    e_t = cb_t (gb over the tokens from t on) and cf_t. So g0 runs from the
    chunk's start unless INCLUSIVE, g1 when INCLUSIVE.

    Grid: (cdiv(K, BK), cdiv(V, BV), B * H * 2).
    """
    i_k, i_v, i_bhd = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_dir, i_bh = i_bhd % 2, i_bhd // 2
    i_b, i_h = i_bh // H, i_bh % H
    x = _base(x, i_b, i_h, sxb, sxh)
    y = _base(y, i_b, i_h, syb, syh)
    g0 = _base(g0, i_b, i_h, s0b, s0h)
    g1 = _base(g1, i_b, i_h, s1b, s1h)
    ks = i_k * BK + tl.arange(0, BK)
    vs = i_v * BV + tl.arange(0, BV)
    out += (i_dir * B * H + i_bh).to(tl.int64) * NT * K * V
    out_offsets = ks[:, None] * V + vs[None, :]
    out_mask = (ks[:, None] < K) & (vs[None, :] < V)
    state = tl.zeros([BK, BV], dtype=tl.float32)
    for n in range(NT):
        c = n + i_dir * (NT - 1 - 2 * n)
        rows = c * BT + tl.arange(0, BT)
        carry = state.to(out.dtype.element_ty)
        tl.store(out + c.to(tl.int64) * K * V + out_offsets, carry, out_mask)
        b_x = _tile(x, rows, ks, sxt, sxd, T, K)
        b_y = _tile(y, rows, vs, syt, syd, T, V)
        # One of the two tile loads is fully masked: no branch in the loop.
        # Both directions' gate sums are read and one kept (README.md).
        cum = _tile(g0, rows, ks, s0t, s0d, T * (1 - i_dir), K)
        cum += _tile(g1, rows, ks, s1t, s1d, T * i_dir, K)
        if INCLUSIVE:  # g0 = cb, g1 = cf
            total1, total0 = _chunk_totals(
                g1, g0, c, ks, s1t, s1d, s0t, s0d, T, K, BT
            )
        else:  # g0 = cf, g1 = cb
            total0, total1 = _chunk_totals(
                g0, g1, c, ks, s0t, s0d, s1t, s1d, T, K, BT
            )
        total = tl.where(i_dir == 0, total0, total1)
        exponent = cum if INCLUSIVE else total[None, :] - cum
        b_x *= exp(tl.minimum(exponent, 0.0))
        state = state * exp(total)[:, None]
        state += _mm(tl.trans(b_x), b_y, DT, DOT)


@triton.jit(do_not_specialize=SIZES)
def bigla_fwd_kernel(
    q, k, v, cum_f, cum_b, states, o, whole,
    sqb, sqh, sqt, sqd, skb, skh, skt, skd, svb, svh, svt, svd,
    sfb, sfh, sft, sfd, sgb, sgh, sgt, sgd, sob, soh, sot, sod,
    scale, T, B, H, NT,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr, DT: tl.constexpr,
    DOT: tl.constexpr,
):  # fmt: skip
    """Output of one chunk, both directions, for a tile of BV value
    channels (BK >= K: all key channels), sub-block by sub-block: the
    chunks that :func:`~.triton_chunk_kernels.chunk_fwd_kernel` left
    (``whole`` 0).

    Grid: (cdiv(V, BV), NT, B * H).
    """
    i_v, i_c, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    q = _base(q, i_b, i_h, sqb, sqh)
    k = _base(k, i_b, i_h, skb, skh)
    v = _base(v, i_b, i_h, svb, svh)
    cum_f = _base(cum_f, i_b, i_h, sfb, sfh)
    cum_b = _base(cum_b, i_b, i_h, sgb, sgh)
    o = _base(o, i_b, i_h, sob, soh)
    ks = tl.arange(0, BK)
    vs = i_v * BV + tl.arange(0, BV)
    NC: tl.constexpr = BT // BC
    sub = tl.arange(0, BC)
    # Nothing runs for a chunk taken whole.
    if tl.load(whole + (i_v * B * H + i_bh).to(tl.int64) * NT + i_c) != 0:
        return
    chunk = (i_bh, i_c, B, H, NT, ks, vs, K, V)
    state_f = _chunk_state(states, 0, *chunk)
    state_b = _chunk_state(states, 1, *chunk)
    strides = (ks, sft, sfd, sgt, sgd, T, K)
    # Loops over the sub-blocks, not unrolled: unrolled, the compiler keeps
    # several sub-blocks' tiles live at once and spills.
    # With cf, cb the chunk's cumulative gates, a decay from token s to t is
    # exp(cf_t - cf_s) (s < t) or exp(cb_t - cb_s) (s > t).
    for r in range(NC):
        rows_r = i_c * BT + r * BC + sub
        q_r = _tile(q, rows_r, ks, sqt, sqd, T, K)
        # cf before block r, cb after it; block r's own sums from there.
        cf_r, tf_r, cb_r, tb_r, before_f, after_b = _block_gates(
            cum_f, cum_b, i_c * BT, r, *strides, BC, NC
        )
        acc = _mm(q_r * exp(before_f[None, :] + cf_r), state_f, DT, DOT)
        acc += _mm(q_r * exp(after_b[None, :] + cb_r), state_b, DT, DOT)
        # Blocks before r, forwards: decays split at block r's start.
        queries = q_r * exp(cf_r)
        for j in range(r):
            rows_j = i_c * BT + j * BC + sub
            k_j = _tile(k, rows_j, ks, skt, skd, T, K)
            cf_j = _gates_tile(cum_f, rows_j, ks, sft, sfd, T, K, True)
            k_j *= exp(tl.minimum(before_f[None, :] - cf_j, 0.0))
            a = _mm(queries, tl.trans(k_j), DT, DOT)
            acc += _mm(a, _tile(v, rows_j, vs, svt, svd, T, V), DT, DOT)
        # Blocks after r, backwards: decays split at block r's end.
        queries = q_r * exp(cb_r)
        for j in range(r + 1, NC):
            rows_j = i_c * BT + j * BC + sub
            k_j = _tile(k, rows_j, ks, skt, skd, T, K)
            cb_j = _gates_tile(cum_b, rows_j, ks, sgt, sgd, T, K, False)
            k_j *= exp(tl.minimum(after_b[None, :] - cb_j, 0.0))
            a = _mm(queries, tl.trans(k_j), DT, DOT)
            acc += _mm(a, _tile(v, rows_j, vs, svt, svd, T, V), DT, DOT)
        # The diagonal block.
        k_r = _tile(k, rows_r, ks, skt, skd, T, K)
        if _factorable(tf_r, tb_r):
            a = _factored_scores(q_r, k_r, cf_r, cb_r, BC, DT, DOT)
        else:
            decays = _diagonal_decays(cf_r, cb_r, BC)
            a = _diagonal_scores(q_r, k_r, decays, BC)
        acc += _mm(a, _tile(v, rows_r, vs, svt, svd, T, V), DT, DOT)
        _put(o, acc * scale, rows_r, vs, sot, sod, T, V)


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


@triton.jit(do_not_specialize=SIZES)
def chunk_fwd_kernel(
    q, k, v, cum_f, cum_b, states, o, whole,
    sqb, sqh, sqt, sqd, skb, skh, skt, skd, svb, svh, svt, svd,
    sfb, sfh, sft, sfd, sgb, sgh, sgt, sgd, sob, soh, sot, sod,
    scale, T, B, H, NT,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr, DT: tl.constexpr,
    DOT: tl.constexpr,
):  # fmt: skip
    """Output of one factorable chunk for a tile of BV value channels:
    o = scale (q_f S^f + q_b S^b + A v), q_f = q exp(cf), q_b = q exp(cb),
    A by :func:`_factored_scores`.

    Grid: (cdiv(V, BV), NT, B * H).
    """
    i_v, i_c, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    ks = tl.arange(0, BK)
    vs = i_v * BV + tl.arange(0, BV)
    rows = i_c * BT + tl.arange(0, BT)
    cum_f = _base(cum_f, i_b, i_h, sfb, sfh)
    cum_b = _base(cum_b, i_b, i_h, sgb, sgh)
    gates = (cum_f, cum_b, i_c, ks, sft, sfd, sgt, sgd, T, K)
    mine = _whole(*_chunk_totals(*gates, BT))
    tl.store(whole + (i_v * B * H + i_bh).to(tl.int64) * NT + i_c, mine)
    if mine:
        cf, cb, tf, tb = _chunk_gates(*gates, BT)
        q_c = _tile(_base(q, i_b, i_h, sqb, sqh), rows, ks, sqt, sqd, T, K)
        k_c = _tile(_base(k, i_b, i_h, skb, skh), rows, ks, skt, skd, T, K)
        v_c = _tile(_base(v, i_b, i_h, svb, svh), rows, vs, svt, svd, T, V)
        chunk = (i_bh, i_c, B, H, NT, ks, vs, K, V)
        state = _chunk_state(states, 0, *chunk)
        acc = _mm(q_c * exp(cf), state, DT, DOT)
        state = _chunk_state(states, 1, *chunk)
        acc += _mm(q_c * exp(cb), state, DT, DOT)
        a = _factored_scores(q_c, k_c, cf, cb, BT, DT, DOT)
        acc += _mm(a, v_c, DT, DOT)
        o = _base(o, i_b, i_h, sob, soh)
        _put(o, acc * scale, rows, vs, sot, sod, T, V)
