"""Backward Triton kernels of the fused bidirectional GLA: dq, dk, dv and
the per-token gate gradient terms of each chunk, then the terms of the
chunks beyond each chunk added at its edge. Notation: :mod:`.triton_parts`."""

import triton
import triton.language as tl

from ..common.triton_math import exp
from .triton_parts import (
    EXACT_DIAGONALS,
    FACTORED_DIAGONALS,
    SIZES,
    WHOLE_CHUNK,
    _base,
    _block_gates,
    _blocks_factorable,
    _chunk_gates,
    _chunk_state,
    _chunk_totals,
    _decay_to_end,
    _diagonal_decays,
    _diagonal_scores,
    _factored_key_grad,
    _factored_query_grad,
    _factored_scores,
    _gates_tile,
    _key_grad,
    _mm,
    _put,
    _query_grad,
    _tile,
    _triangles,
    _value_grads,
    _whole,
)

# The parts of a whole chunk's gradients, one launch each, in this order.
QUERIES, KEYS, VALUES = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)


PARTS = tuple(part.value for part in (QUERIES, KEYS, VALUES))


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
    """One PART of the gradients of a chunk taken whole (BK >= K, BV >= V),
    one launch each: QUERIES (dq, dg's query terms, and the ``kinds`` of
    every chunk), KEYS (dk, dg's key terms subtracted), VALUES (dv).

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


@triton.jit
def _cross_block_grads(
    q_j, k_j, v_j, do_j, k_r, v_r, do_r, key_decay_j, query_decay_j,
    scale, DT: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """Block r's terms (dq_r, dv_r, dk_r) from an off-diagonal block j, dq_r
    and dk_r still without block r's own decay factors."""
    da = _mm(do_r, tl.trans(v_j), DT, DOT) * scale
    dq_r = _mm(da, k_j * key_decay_j, DT, DOT)
    qd_j = q_j * query_decay_j
    a = _mm(qd_j, tl.trans(k_r), DT, DOT) * scale
    dv_r = _mm(tl.trans(a), do_j, DT, DOT)
    da = _mm(do_j, tl.trans(v_r), DT, DOT) * scale
    dk_r = _mm(tl.trans(da), qd_j, DT, DOT)
    return dq_r, dv_r, dk_r


@triton.jit
def _other_block_grads(
    q, k, v, do, cum_f, cum_b, ks, vs, rows,
    sqt, sqd, skt, skd, svt, svd, sot, sod, sft, sfd, sgt, sgd, T, K, V,
    keys, v_r, do_r, key_edge, query_edge, scale,
    BEFORE: tl.constexpr, DT: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """:func:`_cross_block_grads` for the sub-block at ``rows``, before
    block r (``BEFORE``) or after it, decays split at block r's edge."""
    q_j = _tile(q, rows, ks, sqt, sqd, T, K)
    k_j = _tile(k, rows, ks, skt, skd, T, K)
    v_j = _tile(v, rows, vs, svt, svd, T, V)
    do_j = _tile(do, rows, vs, sot, sod, T, V)
    cf_j = _gates_tile(cum_f, rows, ks, sft, sfd, T, K, True)
    cb_j = _gates_tile(cum_b, rows, ks, sgt, sgd, T, K, False)
    if BEFORE:
        key_decay = exp(tl.minimum(key_edge[None, :] - cf_j, 0.0))
        query_decay = exp(tl.minimum(cb_j - query_edge[None, :], 0.0))
    else:
        key_decay = exp(tl.minimum(key_edge[None, :] - cb_j, 0.0))
        query_decay = exp(tl.minimum(cf_j - query_edge[None, :], 0.0))
    return _cross_block_grads(
        q_j, k_j, v_j, do_j, keys, v_r, do_r, key_decay, query_decay,
        scale, DT, DOT,
    )  # fmt: skip


@triton.jit(do_not_specialize=SIZES)
def bigla_bwd_kernel(
    q, k, v, cum_f, cum_b, do, states, d_states, dq, dk, dv, dg, kinds,
    sqb, sqh, sqt, sqd, skb, skh, skt, skd, svb, svh, svt, svd,
    sfb, sfh, sft, sfd, sgb, sgh, sgt, sgd, sob, soh, sot, sod,
    sdqb, sdqh, sdqt, sdqd, sdkb, sdkh, sdkt, sdkd,
    sdvb, sdvh, sdvt, sdvd,
    scale, T, B, H, NT,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr, DT: tl.constexpr,
    DOT: tl.constexpr, EXACT: tl.constexpr,
):  # fmt: skip
    """dq, dk, dv of a chunk not taken whole (BK >= K, BV >= V), and the
    per-token gate terms ``dg[d] = q * dq^d - k * dk^d`` (fp32 (2, B, H, T,
    K)) of each direction d. ``kinds`` selects the chunks: FACTORED_DIAGONALS
    (EXACT False) or EXACT_DIAGONALS (EXACT True), one launch each.

    Grid: (NT, B * H).
    """
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    q = _base(q, i_b, i_h, sqb, sqh)
    k = _base(k, i_b, i_h, skb, skh)
    v = _base(v, i_b, i_h, svb, svh)
    cum_f = _base(cum_f, i_b, i_h, sfb, sfh)
    cum_b = _base(cum_b, i_b, i_h, sgb, sgh)
    do = _base(do, i_b, i_h, sob, soh)
    dq = _base(dq, i_b, i_h, sdqb, sdqh)
    dk = _base(dk, i_b, i_h, sdkb, sdkh)
    dv = _base(dv, i_b, i_h, sdvb, sdvh)
    dgf = dg + i_bh.to(tl.int64) * T * K
    dgb = dgf + B * H * T * K
    ks, vs = tl.arange(0, BK), tl.arange(0, BV)
    NC: tl.constexpr = BT // BC
    sub = tl.arange(0, BC)
    kind = tl.load(kinds + i_bh.to(tl.int64) * NT + i_c)
    if kind != (EXACT_DIAGONALS if EXACT else FACTORED_DIAGONALS):
        return
    chunk = (i_bh, i_c, B, H, NT, ks, vs, K, V)
    state_f = _chunk_state(states, 0, *chunk)
    state_b = _chunk_state(states, 1, *chunk)
    d_next_b = _chunk_state(d_states, 0, *chunk)
    d_next_f = _chunk_state(d_states, 1, *chunk)
    strides = (ks, sft, sfd, sgt, sgd, T, K)
    total_f, total_b = _chunk_totals(cum_f, cum_b, i_c, *strides, BT)
    tiles = (q, k, v, do, cum_f, cum_b, ks, vs)
    tile_strides = (
        sqt, sqd, skt, skd, svt, svd, sot, sod, sft, sfd, sgt, sgd, T, K, V,
    )  # fmt: skip
    for r in range(NC):
        rows_r = i_c * BT + r * BC + sub
        q_r = _tile(q, rows_r, ks, sqt, sqd, T, K)
        k_r = _tile(k, rows_r, ks, skt, skd, T, K)
        v_r = _tile(v, rows_r, vs, svt, svd, T, V)
        do_r = _tile(do, rows_r, vs, sot, sod, T, V)
        cf_r, tf_r, cb_r, tb_r, before_f, after_b = _block_gates(
            cum_f, cum_b, i_c * BT, r, *strides, BC, NC
        )
        da = _mm(do_r, tl.trans(v_r), DT, DOT) * scale
        if not EXACT:  # through the block's ends
            lower, upper = _triangles(BC)
            dq_f = _factored_query_grad(da, k_r, cf_r, lower, DT, DOT)
            dq_b = _factored_query_grad(da, k_r, cb_r, upper, DT, DOT)
            dk_f = _factored_key_grad(da, q_r, cf_r, lower, DT, DOT)
            dk_b = _factored_key_grad(da, q_r, cb_r, upper, DT, DOT)
            a = _factored_scores(q_r, k_r, cf_r, cb_r, BC, DT, DOT)
        else:  # exact decays
            decays = _diagonal_decays(cf_r, cb_r, BC)
            a = _diagonal_scores(q_r, k_r, decays, BC)
            parts = da[:, :, None] * decays  # [query t, key s, channel]
            t = tl.arange(0, BC)[:, None, None]
            s = tl.arange(0, BC)[None, :, None]
            part = parts * k_r[None, :, :]
            dq_f = tl.sum(tl.where(s <= t, part, 0.0), 1)
            dq_b = tl.sum(tl.where(s >= t, part, 0.0), 1)
            part = parts * q_r[:, None, :]
            dk_f = tl.sum(tl.where(s <= t, part, 0.0), 0)
            dk_b = tl.sum(tl.where(s >= t, part, 0.0), 0)
        dv_r = _mm(tl.trans(a), do_r, DT, DOT)
        after_f = total_f - before_f - tf_r
        before_b = total_b - after_b - tb_r
        key_f = _decay_to_end(cf_r, tf_r)
        key_b = _decay_to_end(cb_r, tb_r)
        to_end_f = key_f * exp(tl.minimum(after_f, 0.0))[None, :]
        to_start_b = key_b * exp(tl.minimum(before_b, 0.0))[None, :]
        # Through the states.
        decay_q = exp(before_f[None, :] + cf_r) * scale
        dq_f += _mm(do_r, tl.trans(state_f), DT, DOT) * decay_q
        decay_q = exp(after_b[None, :] + cb_r) * scale
        dq_b += _mm(do_r, tl.trans(state_b), DT, DOT) * decay_q
        dk_f += _mm(v_r, tl.trans(d_next_f), DT, DOT) * to_end_f * scale
        dk_b += _mm(v_r, tl.trans(d_next_b), DT, DOT) * to_start_b * scale
        dv_r += _mm(k_r * to_end_f, d_next_f, DT, DOT)
        dv_r += _mm(k_r * to_start_b, d_next_b, DT, DOT)
        dv_r *= scale
        dq_f_in = tl.zeros([BC, BK], dtype=tl.float32)
        dq_b_in = tl.zeros([BC, BK], dtype=tl.float32)
        dk_f_in = tl.zeros([BC, BK], dtype=tl.float32)
        dk_b_in = tl.zeros([BC, BK], dtype=tl.float32)
        start_b = after_b + tb_r
        for j in range(r):
            part_q, part_v, part_k = _other_block_grads(
                *tiles, i_c * BT + j * BC + sub, *tile_strides, k_r * key_b,
                v_r, do_r, before_f, start_b, scale, True, DT, DOT,
            )  # fmt: skip
            dq_f_in += part_q
            dv_r += part_v
            dk_b_in += part_k
        end_f = before_f + tf_r
        for j in range(r + 1, NC):
            part_q, part_v, part_k = _other_block_grads(
                *tiles, i_c * BT + j * BC + sub, *tile_strides, k_r * key_f,
                v_r, do_r, after_b, end_f, scale, False, DT, DOT,
            )  # fmt: skip
            dq_b_in += part_q
            dv_r += part_v
            dk_f_in += part_k
        dq_f += dq_f_in * exp(cf_r)
        dq_b += dq_b_in * exp(cb_r)
        dk_f += dk_f_in * key_f
        dk_b += dk_b_in * key_b
        _put(dq, dq_f + dq_b, rows_r, ks, sdqt, sdqd, T, K)
        _put(dk, dk_f + dk_b, rows_r, ks, sdkt, sdkd, T, K)
        _put(dv, dv_r, rows_r, vs, sdvt, sdvd, T, V)
        _put(dgf, q_r * dq_f - k_r * dk_f, rows_r, ks, K, 1, T, K)
        _put(dgb, q_r * dq_b - k_r * dk_b, rows_r, ks, K, 1, T, K)


@triton.jit
def _chunk_carries(dg, ks, T, NT, K, BT: tl.constexpr, REVERSE: tl.constexpr):
    """Add to one direction's ``dg`` (T, K), at each chunk's last token
    (``REVERSE``) or first, its sum over the chunks after (before) it."""
    carry = tl.zeros(ks.shape, dtype=tl.float32)
    for n in range(NT):
        c = NT - 1 - n if REVERSE else n
        rows = c * BT + tl.arange(0, BT)
        total = tl.sum(_tile(dg, rows, ks, K, 1, T, K), 0)
        # Every warp has read the chunk before its edge changes.
        tl.debug_barrier()
        edge = tl.minimum(c * BT + BT, T) - 1 if REVERSE else c * BT
        at = dg + edge * K + ks
        tl.store(at, tl.load(at, mask=ks < K) + carry, mask=ks < K)
        carry += total


@triton.jit(do_not_specialize=['T', 'NT'])
def gate_grad_carry_kernel(
    dg, T, NT, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr
):
    """In place on ``dg`` (2, B, H, T, K) fp32: the gradients of the gates'
    sums within chunks (cf, cb) from the per-token terms ``q dq - k dk``.

    Grid: (cdiv(K, BK), B * H, 2).
    """
    i_k, i_bh, i_dir = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    n_bh = tl.num_programs(1)
    dg += (i_dir * n_bh + i_bh).to(tl.int64) * T * K
    ks = i_k * BK + tl.arange(0, BK)
    if i_dir == 0:
        _chunk_carries(dg, ks, T, NT, K, BT, True)
    else:
        _chunk_carries(dg, ks, T, NT, K, BT, False)
