"""Whole-chunk Triton kernels of the fused bidirectional GLA, for chunks
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
from .triton_parts import (
    FACTORED_DIAGONALS,
    SIZES,
    WHOLE_CHUNK,
    _base,
    _block_gates,
    _chunk_state,
    _chunk_totals,
    _factorable,
    _factored_query_grad,
    _factored_scores,
    _gates_tile,
    _key_pair_sums,
    _masked_scores,
    _mm,
    _put,
    _tile,
    _triangles,
)

# Largest |gate sum| over a chunk (per channel and direction) for which it
# is taken whole: its keys' factors then reach e^60 (1e26), and the
# products' operands (bf16, or tf32 / fp32, both with fp32's range of
# 3e38) hold keys up to 3e12 in magnitude; each entry kept is a sum of
# terms q_t k_s exp(cf_t - cf_s) <= |q_t k_s|. Twice the diagonal
# sub-blocks' FACTOR_LIMIT: a strongly gated channel sends its chunk to the
# sub-block kernels only where its gates sum below -60, not -30.
WHOLE_LIMIT = tl.constexpr(60.0)

# The parts of a whole chunk's gradients, one launch each, in this order.
QUERIES, KEYS, VALUES = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)
PARTS = tuple(part.value for part in (QUERIES, KEYS, VALUES))


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
def _blocks_factorable(
    cum_f, cum_b, i_c, ks, sft, sfd, sgt, sgd, T, K,
    BT: tl.constexpr, BC: tl.constexpr,
):  # fmt: skip
    """Whether every sub-block of chunk ``i_c`` is :func:`_factorable`, by
    their gate sums (the sub-blocks' tiles go unused)."""
    NC: tl.constexpr = BT // BC
    blocks = True
    for j in tl.static_range(NC):
        _, tf, _, tb, _, _ = _block_gates(
            cum_f, cum_b, i_c * BT, j, ks, sft, sfd, sgt, sgd, T, K, BC, NC
        )
        blocks = blocks & _factorable(tf, tb)
    return blocks


@triton.jit
def _whole(tf, tb):
    """Whether a chunk with gate totals ``tf``, ``tb`` (BK,) is taken
    whole (:data:`WHOLE_LIMIT`): a scalar, the same for the program."""
    return tl.min(tl.minimum(tf, tb)) >= -WHOLE_LIMIT


@triton.jit
def _query_grad(
    do, da, k, c, mask, state, scale, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """One direction's dq of a whole chunk, with ``c`` (BT, BK) its
    inclusive cumulative gates from the chunk's near end (cf, or cb
    backwards), ``mask`` its triangle of (query, key) pairs, ``da`` =
    scale do v^T and ``state`` the state entering the chunk: the pairs'
    part (:func:`_factored_query_grad`) + scale (do state^T) exp(c)."""
    dq = _mm(do, tl.trans(state), DT, DOT) * scale * exp(c)
    return dq + _factored_query_grad(da, k, c, mask, DT, DOT)


@triton.jit
def _key_grad(
    v, da, q, c, total, mask, d_state, scale,
    DT: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """One direction's dk of a whole chunk, arguments as in
    :func:`_query_grad`, ``total`` the sum of the gates, ``d_state`` the
    gradient of the state leaving the chunk: exp(-c) (da_mask^T (q
    exp(c)) + scale exp(total) (v d_state^T)), the pairs' part and the
    state's (decayed from each key to the chunk's far end, exp(total -
    c)) under one factor."""
    dk = _key_pair_sums(da, q, c, mask, DT, DOT)
    carried = _mm(v, tl.trans(d_state), DT, DOT)
    dk += carried * (scale * exp(total))[None, :]
    return dk * exp(-c)


@triton.jit
def _value_grads(
    q, k, do, c, total, mask, d_state, DT: tl.constexpr, DOT: tl.constexpr
):  # fmt: skip
    """One direction's dv of a whole chunk (unscaled), arguments as in
    :func:`_key_grad`: A^T do + (k exp(total - c)) d_state, with A_ts =
    (q_t exp(c_t)) (k_s exp(-c_s)) on ``mask`` and the keys' factors
    shared by both parts."""
    keys = k * exp(-c)
    a = _masked_scores(q * exp(c), keys, mask, DT, DOT)
    dv = _mm(tl.trans(a), do, DT, DOT)
    keys *= exp(total)[None, :]
    return dv + _mm(keys, d_state, DT, DOT)


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


@triton.jit(do_not_specialize=SIZES)
def chunk_bwd_kernel(
    q, k, v, cum_f, cum_b, do, states, d_states, dq, dk, dv, dg, kinds,
    sqb, sqh, sqt, sqd, skb, skh, skt, skd, svb, svh, svt, svd,
    sfb, sfh, sft, sfd, sgb, sgh, sgt, sgd, sob, soh, sot, sod,
    sdqb, sdqh, sdqt, sdqd, sdkb, sdkh, sdkt, sdkd,
    sdvb, sdvh, sdvt, sdvd,
    scale, T, B, H, NT,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr, DT: tl.constexpr,
    DOT: tl.constexpr, PART: tl.constexpr,
):  # fmt: skip
    """One PART of the gradients of one factorable chunk, as
    :func:`~.triton_backward_kernels.bigla_bwd_kernel` writes them (BK >=
    K, BV >= V), one launch each, in this order: QUERIES (dq and the
    query terms of the gate gradients ``dg``; it also writes the ``kinds``
    of every chunk), KEYS (dk, and dg's key terms subtracted), VALUES
    (dv). One kernel for all would hold three times the tiles. With
    dA = scale do v^T split at the diagonal into its lower (keys s <= t,
    forward) and upper (s >= t, backward) triangles, k_f = k exp(-cf),
    q_f = q exp(cf) (and _b with cb):
    dq_f = exp(cf) (dA_lower k_f + scale do S^f^T),
    dk_f = exp(-cf) dA_lower^T q_f + scale (v dS^f^T) exp(tf - cf),
    dv = scale (A^T do + (k exp(tf - cf)) dS^f + (k exp(tb - cb)) dS^b),
    dS^f the gradient of the forward state leaving the chunk.

    Grid: (NT, B * H).
    """
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    ks, vs = tl.arange(0, BK), tl.arange(0, BV)
    rows = i_c * BT + tl.arange(0, BT)
    cum_f = _base(cum_f, i_b, i_h, sfb, sfh)
    cum_b = _base(cum_b, i_b, i_h, sgb, sgh)
    gates = (cum_f, cum_b, i_c, ks, sft, sfd, sgt, sgd, T, K)
    flag = kinds + i_bh.to(tl.int64) * NT + i_c
    if PART != QUERIES:  # as the first launch found
        kind = tl.load(flag)
    else:
        blocks = _blocks_factorable(*gates, BT, BC)
        kind = tl.where(
            _whole(*_chunk_totals(*gates, BT)),
            WHOLE_CHUNK,
            blocks.to(tl.int32) * FACTORED_DIAGONALS,
        )
        tl.store(flag, kind)
    if kind == WHOLE_CHUNK:
        cf, cb, tf, tb = _chunk_gates(*gates, BT)
        q_c = _tile(_base(q, i_b, i_h, sqb, sqh), rows, ks, sqt, sqd, T, K)
        k_c = _tile(_base(k, i_b, i_h, skb, skh), rows, ks, skt, skd, T, K)
        do_c = _tile(_base(do, i_b, i_h, sob, soh), rows, vs, sot, sod, T, V)
        chunk = (i_bh, i_c, B, H, NT, ks, vs, K, V)
        lower, upper = _triangles(BT)
        if PART == VALUES:
            dv_c = _value_grads(
                q_c, k_c, do_c, cf, tf, lower,
                _chunk_state(d_states, 1, *chunk), DT, DOT,
            )  # fmt: skip
            dv_c += _value_grads(
                q_c, k_c, do_c, cb, tb, upper,
                _chunk_state(d_states, 0, *chunk), DT, DOT,
            )  # fmt: skip
            dv = _base(dv, i_b, i_h, sdvb, sdvh)
            _put(dv, dv_c * scale, rows, vs, sdvt, sdvd, T, V)
        else:
            v_c = _tile(_base(v, i_b, i_h, svb, svh), rows, vs, svt, svd, T, V)
            da = _mm(do_c, tl.trans(v_c), DT, DOT) * scale
            dgf = dg + i_bh.to(tl.int64) * T * K
            dgb = dgf + B * H * T * K
        if PART == QUERIES:  # and the gate gradients' query terms
            dq_f = _query_grad(
                do_c, da, k_c, cf, lower,
                _chunk_state(states, 0, *chunk), scale, DT, DOT,
            )  # fmt: skip
            _put(dgf, q_c * dq_f, rows, ks, K, 1, T, K)
            dq_b = _query_grad(
                do_c, da, k_c, cb, upper,
                _chunk_state(states, 1, *chunk), scale, DT, DOT,
            )  # fmt: skip
            _put(dgb, q_c * dq_b, rows, ks, K, 1, T, K)
            dq = _base(dq, i_b, i_h, sdqb, sdqh)
            _put(dq, dq_f + dq_b, rows, ks, sdqt, sdqd, T, K)
        if PART == KEYS:  # and the gate gradients' key terms
            dk_f = _key_grad(
                v_c, da, q_c, cf, tf, lower,
                _chunk_state(d_states, 1, *chunk), scale, DT, DOT,
            )  # fmt: skip
            dg_f = _tile(dgf, rows, ks, K, 1, T, K) - k_c * dk_f
            _put(dgf, dg_f, rows, ks, K, 1, T, K)
            dk_b = _key_grad(
                v_c, da, q_c, cb, tb, upper,
                _chunk_state(d_states, 0, *chunk), scale, DT, DOT,
            )  # fmt: skip
            dg_b = _tile(dgb, rows, ks, K, 1, T, K) - k_c * dk_b
            _put(dgb, dg_b, rows, ks, K, 1, T, K)
            dk = _base(dk, i_b, i_h, sdkb, sdkh)
            _put(dk, dk_f + dk_b, rows, ks, sdkt, sdkd, T, K)
