"""Triton kernels of TTT's SwiGLU inner model, forward and backward.

Per head (program row ``bh`` of B*H; N tokens of width d, padded to the
power of two ``BLOCK_D`` and masked), with W = [W1 | W2] the initial inner
weights, Z1 = k W1, Z2 = k W2, silu' the derivative of silu:

- :func:`step_sums_kernel`: the inner gradients' raw sums
  R1 = k^T (v * silu(Z2)), R2 = k^T (v * Z1 * silu'(Z2)) (d x d each) over
  a token range, whose totals give the step W' = W - G / (||G|| + 1),
  G = -(eta / N) R.
- :func:`output_kernel`: o = (q W1') * silu(q W2') over a token range
  (W' loaded once: 32 KB of fp32 at d = 64, against 4 KB of a tile's q).
- :func:`query_grad_kernel`: dq over a token range, and its partial
  dW1' = q^T dY1, dW2' = q^T dY2.
- :func:`key_value_grad_kernel`: dk, dv over a token range from dR1, dR2,
  and its partial gradients of W1, W2 through Z1, Z2.
- :func:`step_kernel`, :func:`step_grad_kernel`: the clipped step
  W' = W - G / (||G|| + 1) of one d x d matrix per head and its gradient,
  each one pass over the head's d x d matrices.

Every N-sized intermediate (Z, the SiLU terms, their gradients) is fp32 in
registers; products as in :mod:`mmlvit.ops.common.tiles`
(``PRECISION``); q, k, v and their gradients keep the input dtype, tensors
are addressed through their strides (views of a ``qkv`` projection). d x d
matrices are fp32 and contiguous: the learned W (index h, or b*H + h when
``W_PER_BATCH``), the stepped W' and dR (index bh), and per-split partial
sums (index bh * splits + split).
"""

import triton
import triton.language as tl

from ..common.tiles import _dot, _range_tokens, _store, _tile
from ..common.triton_math import _silu_terms, sigmoid

# Not specialised on, as in common.linear_kernels: the head width D is.
SIZES = ['H', 'N']


@triton.jit
def _square_offsets(index, D, BLOCK_D: tl.constexpr):
    """Offsets and mask of d x d matrix ``index`` of a contiguous stack."""
    rows = tl.arange(0, BLOCK_D)
    cols = tl.arange(0, BLOCK_D)
    offsets = index.to(tl.int64) * D * D + rows[:, None] * D + cols[None, :]
    return offsets, (rows[:, None] < D) & (cols[None, :] < D)


@triton.jit
def _load_square(ptr, index, D, BLOCK_D: tl.constexpr):
    """Matrix ``index`` as a (BLOCK_D, BLOCK_D) fp32 tile, zero padded."""
    offsets, mask = _square_offsets(index, D, BLOCK_D)
    return tl.load(ptr + offsets, mask=mask, other=0.0)


@triton.jit
def _store_square(ptr, index, D, x, BLOCK_D: tl.constexpr):
    offsets, mask = _square_offsets(index, D, BLOCK_D)
    tl.store(ptr + offsets, x, mask=mask)


@triton.jit
def _learned_weights(
    w1_ptr, w2_ptr, bh, H, D, W_PER_BATCH: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    """Head ``bh``'s learned W1, W2 (index h, or bh when per batch)."""
    index = bh if W_PER_BATCH else bh % H
    w1 = _load_square(w1_ptr, index, D, BLOCK_D)
    return w1, _load_square(w2_ptr, index, D, BLOCK_D)


@triton.jit
def _step_squares(
    w1_ptr, w2_ptr, dr1_ptr, dr2_ptr, bh, H, D, W_PER_BATCH: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    """Head ``bh``'s learned W1, W2 and the gradients dR1, dR2 of its
    inner step's sums."""
    w1, w2 = _learned_weights(w1_ptr, w2_ptr, bh, H, D, W_PER_BATCH, BLOCK_D)
    dr1 = _load_square(dr1_ptr, bh, D, BLOCK_D)
    return w1, w2, dr1, _load_square(dr2_ptr, bh, D, BLOCK_D)


@triton.jit(do_not_specialize=SIZES + ['splits', 'tiles_per_split'])
def step_sums_kernel(
    k_ptr, v_ptr, w1_ptr, w2_ptr, r1_ptr, r2_ptr,
    skb, skh, skn, svb, svh, svn,
    H, D, N, splits, tiles_per_split,
    W_PER_BATCH: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """R1, R2 over one token range: grid (B*H, splits), partials."""
    bh = tl.program_id(0)
    split = tl.program_id(1)
    cd = tl.arange(0, BLOCK_D)
    w1, w2 = _learned_weights(w1_ptr, w2_ptr, bh, H, D, W_PER_BATCH, BLOCK_D)
    r1 = tl.zeros((BLOCK_D, BLOCK_D), tl.float32)
    r2 = tl.zeros((BLOCK_D, BLOCK_D), tl.float32)
    for t in range(tiles_per_split):
        tokens, valid = _range_tokens(split, t, tiles_per_split, N, BLOCK_N)
        k = _tile(k_ptr, skb, skh, skn, bh, H, tokens, valid, cd, D)
        v = _tile(v_ptr, svb, svh, svn, bh, H, tokens, valid, cd, D)
        z1 = _dot(k, w1, PRECISION)
        silu, silu_grad = _silu_terms(_dot(k, w2, PRECISION))
        k_t = tl.trans(k)
        r1 += _dot(k_t, v * silu, PRECISION)
        r2 += _dot(k_t, v * z1 * silu_grad, PRECISION)
    _store_square(r1_ptr, bh * splits + split, D, r1, BLOCK_D)
    _store_square(r2_ptr, bh * splits + split, D, r2, BLOCK_D)


@triton.jit(do_not_specialize=SIZES + ['tiles_per_split'])
def output_kernel(
    q_ptr, o_ptr, w1_ptr, w2_ptr,
    sqb, sqh, sqn, sob, soh, son,
    H, D, N, tiles_per_split,
    PRECISION: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """o over one token range from the stepped W1', W2', loaded once:
    grid (B*H, splits)."""
    bh = tl.program_id(0)
    split = tl.program_id(1)
    cd = tl.arange(0, BLOCK_D)
    w1 = _load_square(w1_ptr, bh, D, BLOCK_D)
    w2 = _load_square(w2_ptr, bh, D, BLOCK_D)
    for t in range(tiles_per_split):
        tokens, valid = _range_tokens(split, t, tiles_per_split, N, BLOCK_N)
        q = _tile(q_ptr, sqb, sqh, sqn, bh, H, tokens, valid, cd, D)
        y1 = _dot(q, w1, PRECISION)
        silu, _ = _silu_terms(_dot(q, w2, PRECISION))
        _store(o_ptr, sob, soh, son, bh, H, tokens, valid, cd, D, y1 * silu)


@triton.jit(do_not_specialize=SIZES + ['splits', 'tiles_per_split'])
def query_grad_kernel(
    q_ptr, do_ptr, dq_ptr, w1_ptr, w2_ptr, a1_ptr, a2_ptr,
    sqb, sqh, sqn, sdob, sdoh, sdon, sdqb, sdqh, sdqn,
    H, D, N, splits, tiles_per_split,
    PRECISION: tl.constexpr, RELOAD_SQUARES: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """dq over one token range and its partial dW1', dW2': grid
    (B*H, splits). W1', W2' are loaded once, or once per tile with
    ``RELOAD_SQUARES`` (see :func:`key_value_grad_kernel`).

    dY1 = do * silu(Y2), dY2 = do * Y1 * silu'(Y2) with Y = q W',
    dq = dY1 W1'^T + dY2 W2'^T, dW1' += q^T dY1, dW2' += q^T dY2.
    """
    bh = tl.program_id(0)
    split = tl.program_id(1)
    cd = tl.arange(0, BLOCK_D)
    if not RELOAD_SQUARES:
        w1 = _load_square(w1_ptr, bh, D, BLOCK_D)
        w2 = _load_square(w2_ptr, bh, D, BLOCK_D)
    a1 = tl.zeros((BLOCK_D, BLOCK_D), tl.float32)
    a2 = tl.zeros((BLOCK_D, BLOCK_D), tl.float32)
    for t in range(tiles_per_split):
        if RELOAD_SQUARES:
            w1 = _load_square(w1_ptr, bh, D, BLOCK_D)
            w2 = _load_square(w2_ptr, bh, D, BLOCK_D)
        tokens, valid = _range_tokens(split, t, tiles_per_split, N, BLOCK_N)
        q = _tile(q_ptr, sqb, sqh, sqn, bh, H, tokens, valid, cd, D)
        do = _tile(do_ptr, sdob, sdoh, sdon, bh, H, tokens, valid, cd, D)
        y1 = _dot(q, w1, PRECISION)
        silu, silu_grad = _silu_terms(_dot(q, w2, PRECISION))
        dy1 = do * silu
        dy2 = do * y1 * silu_grad
        dq = _dot(dy1, tl.trans(w1), PRECISION)
        dq += _dot(dy2, tl.trans(w2), PRECISION)
        _store(dq_ptr, sdqb, sdqh, sdqn, bh, H, tokens, valid, cd, D, dq)
        q_t = tl.trans(q)
        a1 += _dot(q_t, dy1, PRECISION)
        a2 += _dot(q_t, dy2, PRECISION)
    _store_square(a1_ptr, bh * splits + split, D, a1, BLOCK_D)
    _store_square(a2_ptr, bh * splits + split, D, a2, BLOCK_D)


@triton.jit(do_not_specialize=SIZES + ['splits', 'tiles_per_split'])
def key_value_grad_kernel(
    k_ptr, v_ptr, dk_ptr, dv_ptr, w1_ptr, w2_ptr, dr1_ptr, dr2_ptr,
    g1_ptr, g2_ptr,
    skb, skh, skn, svb, svh, svn, sdkb, sdkh, sdkn, sdvb, sdvh, sdvn,
    H, D, N, splits, tiles_per_split,
    W_PER_BATCH: tl.constexpr, PRECISION: tl.constexpr,
    RELOAD_SQUARES: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    """dk, dv over one token range from dR1, dR2, and the range's partial
    gradients of W1, W2 through Z: grid (B*H, splits).

    W1, W2, dR1, dR2 are loaded once and held across the token loop, or,
    with ``RELOAD_SQUARES``, loaded again for every tile (from the L2
    cache): held, the tensor cores' copies of them and of their transposes
    live in shared memory for the whole loop, which for fp32 products
    ('tf32x3': two parts of each) is more than one program may have
    (README.md).

    With A = v * silu(Z2), Bm = v * Z1 * silu'(Z2), dA = k dR1,
    dBm = k dR2: dv = dA * silu(Z2) + dBm * Z1 * silu'(Z2),
    dZ1 = dBm * v * silu'(Z2),
    dZ2 = dA * v * silu'(Z2) + dBm * v * Z1 * silu''(Z2),
    dk = A dR1^T + Bm dR2^T + dZ1 W1^T + dZ2 W2^T, dW1 += k^T dZ1,
    dW2 += k^T dZ2; silu'' = s (1 - s) (2 + z (1 - 2 s)).
    """
    bh = tl.program_id(0)
    split = tl.program_id(1)
    cd = tl.arange(0, BLOCK_D)
    if not RELOAD_SQUARES:
        w1, w2, dr1, dr2 = _step_squares(
            w1_ptr, w2_ptr, dr1_ptr, dr2_ptr, bh, H, D, W_PER_BATCH, BLOCK_D
        )
    g1 = tl.zeros((BLOCK_D, BLOCK_D), tl.float32)
    g2 = tl.zeros((BLOCK_D, BLOCK_D), tl.float32)
    for t in range(tiles_per_split):
        if RELOAD_SQUARES:
            w1, w2, dr1, dr2 = _step_squares(
                w1_ptr, w2_ptr, dr1_ptr, dr2_ptr, bh, H, D, W_PER_BATCH,
                BLOCK_D,
            )  # fmt: skip
        tokens, valid = _range_tokens(split, t, tiles_per_split, N, BLOCK_N)
        k = _tile(k_ptr, skb, skh, skn, bh, H, tokens, valid, cd, D)
        v = _tile(v_ptr, svb, svh, svn, bh, H, tokens, valid, cd, D)
        z1 = _dot(k, w1, PRECISION)
        z2 = _dot(k, w2, PRECISION)
        s = sigmoid(z2)
        silu, silu_grad = _silu_terms(z2)
        silu_grad2 = s * (1.0 - s) * (2.0 + z2 * (1.0 - 2.0 * s))
        a = v * silu
        b = v * z1 * silu_grad
        da = _dot(k, dr1, PRECISION)
        db = _dot(k, dr2, PRECISION)
        dv = da * silu + db * z1 * silu_grad
        dz1 = db * v * silu_grad
        dz2 = da * v * silu_grad + db * v * z1 * silu_grad2
        dk = _dot(a, tl.trans(dr1), PRECISION)
        dk += _dot(b, tl.trans(dr2), PRECISION)
        dk += _dot(dz1, tl.trans(w1), PRECISION)
        dk += _dot(dz2, tl.trans(w2), PRECISION)
        _store(dk_ptr, sdkb, sdkh, sdkn, bh, H, tokens, valid, cd, D, dk)
        _store(dv_ptr, sdvb, sdvh, sdvn, bh, H, tokens, valid, cd, D, dv)
        k_t = tl.trans(k)
        g1 += _dot(k_t, dz1, PRECISION)
        g2 += _dot(k_t, dz2, PRECISION)
    _store_square(g1_ptr, bh * splits + split, D, g1, BLOCK_D)
    _store_square(g2_ptr, bh * splits + split, D, g2, BLOCK_D)


@triton.jit
def _step_terms(r_ptr, bh, D, factor, BLOCK_D: tl.constexpr):
    """Head ``bh``'s step G = factor * R, its column norms (over the input
    axis) and 1 / (norm + 1), per column."""
    g = _load_square(r_ptr, bh, D, BLOCK_D) * factor
    norm = tl.sqrt(tl.sum(g * g, axis=0))
    return g, norm, 1.0 / (norm + 1.0)


@triton.jit
def step_kernel(
    w_ptr, r_ptr, out_ptr, H, D, factor,
    W_PER_BATCH: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """The clipped step W' = W - G / (||G|| + 1) of head ``bh``: grid
    (B*H,)."""
    bh = tl.program_id(0)
    index = bh if W_PER_BATCH else bh % H
    w = _load_square(w_ptr, index, D, BLOCK_D)
    g, _, inverse = _step_terms(r_ptr, bh, D, factor, BLOCK_D)
    _store_square(out_ptr, bh, D, w - g * inverse[None, :], BLOCK_D)


@triton.jit
def step_grad_kernel(
    r_ptr, dw_ptr, dr_ptr, D, factor, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """dR of :func:`step_kernel`'s W' given dW', head ``bh``: grid (B*H,).

    Per column, with a = 1 / (||G|| + 1) and s = sum_i dW'_i G_i:
    dG = (a^2 s / ||G||) G - a dW' (the first term 0 where G is 0), and
    dR = factor * dG.
    """
    bh = tl.program_id(0)
    g, norm, inverse = _step_terms(r_ptr, bh, D, factor, BLOCK_D)
    dw = _load_square(dw_ptr, bh, D, BLOCK_D)
    inner = tl.sum(dw * g, axis=0)
    # Where G's column is 0 so is s: a denominator of 1 keeps it 0.
    along = inverse * inverse * inner / tl.where(norm > 0.0, norm, 1.0)
    dg = g * along[None, :] - dw * inverse[None, :]
    _store_square(dr_ptr, bh, D, dg * factor, BLOCK_D)
