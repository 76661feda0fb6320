"""Triton helpers of the fused bidirectional GLA kernels
(:mod:`.triton_forward`, :mod:`.triton_backward`).

Per head: chunks of BT (64) tokens, sub-blocks of BC (16). The gates come
as inclusive cumulative sums within each chunk: ``cf`` of the forward
gates from the chunk's start, ``cb`` of the backward ones from its end,
fp32 (B, H, T, d_k). Tensors are (B, H, T, d), any strides. ``DT`` is the
dtype of q, k, v, ``DOT`` the one handed to ``tl.dot`` (fp32 holding
DT-rounded values under the interpreter, whose bf16 products are wrong).
The math and how decays are factored: README.md.
"""

import triton
import triton.language as tl

from ..common.triton_math import exp

# Sizes not specialised on: one compilation serves every batch and length.
SIZES = ['T', 'B', 'H', 'NT']
# Largest |gate sum| over a diagonal sub-block (per channel and direction)
# factored through its ends: keys grow by at most e^30.
FACTOR_LIMIT = tl.constexpr(30.0)
# How a chunk is taken: whole, or by sub-blocks with factored or exact
# diagonals.
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
    """Row ``row`` of cumulative gates, fp32 (BK,), 0 unless ``valid``."""
    mask = (ks < K) & valid
    return tl.load(ptr + row * stride_t + ks * stride_d, mask=mask, other=0.0)


@triton.jit
def _gates_tile(
    ptr, rows, ks, stride_t, stride_d, T, K, FROM_START: tl.constexpr
):
    """cf (``FROM_START``) or cb at ``rows``, fp32 (rows, BK). Past T, cf
    keeps its last value (exp(-cf) stays finite) and cb is 0, set by a
    select after the load (fewer layout conversions, README.md)."""
    tile = _tile(ptr, rows, ks, stride_t, stride_d, T, K)
    if FROM_START:
        last = _gate_row(ptr, T - 1, True, ks, stride_t, stride_d, K)
        return tl.where(rows[:, None] < T, tile, last[None, :])
    return tl.where(rows[:, None] < T, tile, 0.0)


@triton.jit
def _chunk_totals(cf, cb, i_c, ks, sft, sfd, sgt, sgd, T, K, BT: tl.constexpr):
    """Gate sums (BK,) of chunk ``i_c``: cf at its end, cb at its start."""
    last = tl.minimum(i_c * BT + BT, T) - 1
    tf = _gate_row(cf, last, True, ks, sft, sfd, K)
    return tf, _gate_row(cb, i_c * BT, True, ks, sgt, sgd, K)


@triton.jit
def _block_gates(
    cf, cb, start, j, ks, sft, sfd, sgt, sgd, T, K,
    BC: tl.constexpr, NC: tl.constexpr,
):  # fmt: skip
    """Sub-block ``j`` of the chunk starting at ``start``: cf_j, cb_j (BC,
    BK) within it, their sums tf_j, tb_j, and the chunk's cf before it and
    cb after it (BK,)."""
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
    """Tile (BK, BV) of a (2, B * H, NT, K, V) buffer of chunk states,
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
    """``a @ b``, operands rounded to DT, accumulated in fp32."""
    return tl.dot(a.to(DT).to(DOT), b.to(DT).to(DOT), out_dtype=tl.float32)


@triton.jit
def _mm_wide(a, b, DT: tl.constexpr, DOT: tl.constexpr):
    """:func:`_mm` for factored diagonals, whose key factors reach
    e^FACTOR_LIMIT: fp16 operands multiply as tf32 (fp32's range)."""
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
    """Whether diagonal sub-blocks with gate sums ``tf``, ``tb`` are all
    factored through their ends: a scalar."""
    return tl.min(tl.minimum(tf, tb)) >= -FACTOR_LIMIT


@triton.jit
def _decay_to_end(c, total):
    """exp(total - c), (rows, BK): decay from each token to its span's far
    end."""
    return exp(tl.minimum(total[None, :] - c, 0.0))


@triton.jit
def _factored_direction_scores(
    q, k, c, mask, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """One direction's A_ts on ``mask``, (rows, rows): (q exp(c)) (k
    exp(-c))^T."""
    return _masked_scores(q * exp(c), k * exp(-c), mask, DT, DOT)


@triton.jit
def _masked_scores(
    queries, keys, mask, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """``queries @ keys^T`` on ``mask``, (rows, rows) fp32."""
    return tl.where(mask, _mm_wide(queries, tl.trans(keys), DT, DOT), 0.0)


@triton.jit
def _factored_scores(
    q, k, cf, cb, BC: tl.constexpr, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """A_ts of a factorable sub-block, (BC, BC): forwards for s <= t,
    backwards for s >= t."""
    lower, upper = _triangles(BC)
    a = _factored_direction_scores(q, k, cf, lower, DT, DOT)
    return a + _factored_direction_scores(q, k, cb, upper, DT, DOT)


@triton.jit
def _factored_query_grad(
    da, k, c, mask, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """dq of the pairs in ``mask`` through one direction, (rows, BK):
    exp(c) (da_mask (k exp(-c))), da = scale do v^T."""
    dq = _mm_wide(tl.where(mask, da, 0.0), k * exp(-c), DT, DOT)
    return dq * exp(c)


@triton.jit
def _factored_key_grad(
    da, q, c, mask, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """dk of the pairs in ``mask``, (rows, BK)."""
    return _key_pair_sums(da, q, c, mask, DT, DOT) * exp(-c)


@triton.jit
def _key_pair_sums(
    da, q, c, mask, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """da_mask^T (q exp(c)), (rows, BK): dk before the factor exp(-c)."""
    da = tl.trans(tl.where(mask, da, 0.0))
    return _mm_wide(da, q * exp(c), DT, DOT)


@triton.jit
def _diagonal_decays(cf, cb, BC: tl.constexpr):
    """Exact decays within a sub-block, (BC, BC, BK) [query t, key s,
    channel]: exp(cf_t - cf_s) for s < t, exp(cb_t - cb_s) for s > t, 1 at
    s = t."""
    t = tl.arange(0, BC)[:, None, None]
    s = tl.arange(0, BC)[None, :, None]
    forward = cf[:, None, :] - cf[None, :, :]
    backward = cb[:, None, :] - cb[None, :, :]
    return exp(tl.where(s < t, forward, tl.where(s > t, backward, 0.0)))


@triton.jit
def _diagonal_scores(q, k, decays, BC: tl.constexpr):
    """A_ts of a sub-block from exact decays, (BC, BC), doubled at s = t
    (both directions count a token's own key)."""
    a = tl.sum(q[:, None, :] * k[None, :, :] * decays, 2)
    sub = tl.arange(0, BC)
    return tl.where(sub[:, None] == sub[None, :], 2.0 * a, a)


@triton.jit
def _base(ptr, i_b, i_h, stride_b, stride_h):
    return ptr + i_b.to(tl.int64) * stride_b + i_h.to(tl.int64) * stride_h


# Largest |gate sum| over a chunk (per channel and direction) taken whole:
# its keys' factors reach e^60, inside fp32's and bf16's range (README.md).
WHOLE_LIMIT = tl.constexpr(60.0)


@triton.jit
def _chunk_gates(
    cum_f, cum_b, i_c, ks, sft, sfd, sgt, sgd, T, K, BT: tl.constexpr
):  # fmt: skip
    """cf, cb (BT, BK) of chunk ``i_c`` and their sums tf, tb (BK,)."""
    rows = i_c * BT + tl.arange(0, BT)
    cf = _gates_tile(cum_f, rows, ks, sft, sfd, T, K, True)
    cb = _gates_tile(cum_b, rows, ks, sgt, sgd, T, K, False)
    tf, tb = _chunk_totals(cum_f, cum_b, i_c, ks, sft, sfd, sgt, sgd, T, K, BT)
    return cf, cb, tf, tb


@triton.jit
def _whole(tf, tb):
    """Whether a chunk with gate sums ``tf``, ``tb`` is taken whole: a
    scalar."""
    return tl.min(tl.minimum(tf, tb)) >= -WHOLE_LIMIT


@triton.jit
def _blocks_factorable(
    cum_f, cum_b, i_c, ks, sft, sfd, sgt, sgd, T, K,
    BT: tl.constexpr, BC: tl.constexpr,
):  # fmt: skip
    """Whether every sub-block of chunk ``i_c`` is :func:`_factorable`."""
    NC: tl.constexpr = BT // BC
    blocks = True
    for j in tl.static_range(NC):
        _, tf, _, tb, _, _ = _block_gates(
            cum_f, cum_b, i_c * BT, j, ks, sft, sfd, sgt, sgd, T, K, BC, NC
        )
        blocks = blocks & _factorable(tf, tb)
    return blocks


@triton.jit
def _query_grad(
    do, da, k, c, mask, state, scale, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """One direction's dq of a whole chunk, (BT, BK): the pairs' part plus
    scale (do state^T) exp(c), ``state`` the state entering the chunk."""
    dq = _mm(do, tl.trans(state), DT, DOT) * scale * exp(c)
    return dq + _factored_query_grad(da, k, c, mask, DT, DOT)


@triton.jit
def _key_grad(
    v, da, q, c, total, mask, d_state, scale,
    DT: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """One direction's dk of a whole chunk, (BT, BK): the pairs' part plus
    the leaving state's gradient ``d_state`` decayed to each key."""
    dk = _key_pair_sums(da, q, c, mask, DT, DOT)
    carried = _mm(v, tl.trans(d_state), DT, DOT)
    dk += carried * (scale * exp(total))[None, :]
    return dk * exp(-c)


@triton.jit
def _value_grads(
    q, k, do, c, total, mask, d_state, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """One direction's dv of a whole chunk (unscaled), (BT, BV): A^T do +
    (k exp(total - c)) d_state."""
    keys = k * exp(-c)
    a = _masked_scores(q * exp(c), keys, mask, DT, DOT)
    dv = _mm(tl.trans(a), do, DT, DOT)
    keys *= exp(total)[None, :]
    return dv + _mm(keys, d_state, DT, DOT)
