"""Forward Triton kernels of the fused bidirectional GLA: the chunk states
of both directions, the outputs of the chunks taken whole and of the
others by sub-blocks. Notation: :mod:`.triton_parts`."""

import triton
import triton.language as tl

from ..common.triton_math import exp
from .triton_parts import (
    SIZES,
    _base,
    _block_gates,
    _chunk_gates,
    _chunk_state,
    _chunk_totals,
    _diagonal_decays,
    _diagonal_scores,
    _factorable,
    _factored_scores,
    _gates_tile,
    _mm,
    _put,
    _tile,
    _whole,
)


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
    """Exclusive scans of chunk summaries, direction 0 (gates ``g0``) left
    to right, 1 (``g1``) right to left: chunk c's summary is ``sum_t (x_t
    exp(e_t))^T y_t``, e_t the log-decay from t to the chunk's far end (t's
    own gate included when INCLUSIVE). Writes the carry entering each chunk
    to ``out`` (2, B, H, NT, K, V). States: x, y, g0, g1 = k, v, cf, cb;
    their gradients: q, dL/do, cb, cf with INCLUSIVE.

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
def chunk_fwd_kernel(
    q, k, v, cum_f, cum_b, states, o, whole,
    sqb, sqh, sqt, sqd, skb, skh, skt, skd, svb, svh, svt, svd,
    sfb, sfh, sft, sfd, sgb, sgh, sgt, sgd, sob, soh, sot, sod,
    scale, T, B, H, NT,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr, DT: tl.constexpr,
    DOT: tl.constexpr,
):  # fmt: skip
    """Output of a chunk taken whole, a tile of BV value channels: o = scale
    (q_f S^f + q_b S^b + A v); flags it in ``whole``.

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
def bigla_fwd_kernel(
    q, k, v, cum_f, cum_b, states, o, whole,
    sqb, sqh, sqt, sqd, skb, skh, skt, skd, svb, svh, svt, svd,
    sfb, sfh, sft, sfd, sgb, sgh, sgt, sgd, sob, soh, sot, sod,
    scale, T, B, H, NT,
    K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr, DT: tl.constexpr,
    DOT: tl.constexpr,
):  # fmt: skip
    """Output of a chunk not taken whole (``whole`` 0), sub-block by
    sub-block, a tile of BV value channels (BK >= K).

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
    if tl.load(whole + (i_v * B * H + i_bh).to(tl.int64) * NT + i_c) != 0:
        return
    chunk = (i_bh, i_c, B, H, NT, ks, vs, K, V)
    state_f = _chunk_state(states, 0, *chunk)
    state_b = _chunk_state(states, 1, *chunk)
    strides = (ks, sft, sfd, sgt, sgd, T, K)
    for r in range(NC):
        rows_r = i_c * BT + r * BC + sub
        q_r = _tile(q, rows_r, ks, sqt, sqd, T, K)
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
