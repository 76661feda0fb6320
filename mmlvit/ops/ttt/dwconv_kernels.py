"""Triton kernels of TTT's depthwise 3x3 conv inner model, forward and
backward.

Per image (program row ``b``), on an H x W grid of d channels, zero
padding 1, with tap t = 3 a + c the offset (a - 1, c - 1) and
nbr_t(p) the grid point p shifted by it (zero outside the grid):

- :func:`conv_sums_kernel`: the inner gradient's raw sums
  R[t, ch] = sum_p k[nbr_t(p), ch] v[p, ch] over a token range; the step
  W3' = W3 - G / (||G|| + 1), G = -(eta / HW) R, is PyTorch on (B, 9, d).
- :func:`conv_output_kernel`: o[p] = sum_t W3'[t] * q[nbr_t(p)] for one
  token tile.
- :func:`conv_query_grad_kernel`: dq[p] = sum_t W3'[t] * do[nbr_{8-t}(p)]
  (the flipped tap undoes the shift) over a token range, and its partial
  dW3'[t] = sum_p do[p] q[nbr_t(p)].
- :func:`conv_key_value_grad_kernel`: dv[p] = sum_t dR[t] k[nbr_t(p)],
  dk[p] = sum_t dR[t] v[nbr_{8-t}(p)] for one token tile.

Grid tensors are addressed through (batch, channel, row, column) strides,
so (B, d, H, W) views of a token-major ``qkv`` projection are read in
place; every sum is fp32 in registers (no products of 16-bit tiles), the
inputs and gradients keep their dtype. (B, 9, d) matrices and the
per-split partials (B, splits, 9, d) are fp32 and contiguous.
"""

import triton
import triton.language as tl

SIZES = ['D', 'grid_h', 'grid_w', 'N']
TAPS = 16  # 9 taps padded to a power of two


@triton.jit
def _range_tokens(split, t, tiles_per_split, N, BLOCK_N: tl.constexpr):
    """Token indices of tile ``t`` of a split's range, and which exist."""
    idx = (split * tiles_per_split + t) * BLOCK_N + tl.arange(0, BLOCK_N)
    return idx, idx < N


@triton.jit
def _shifted(tokens, valid, grid_h, grid_w, tap):
    """Rows, columns and which exist of the tokens shifted by ``tap``."""
    y = tokens // grid_w + tap // 3 - 1
    x = tokens % grid_w + tap % 3 - 1
    inside = (y >= 0) & (y < grid_h) & (x >= 0) & (x < grid_w)
    return y, x, valid & inside


@triton.jit
def _grid_offsets(strides, b, y, x, cols):
    sb, sc, sy, sx = strides
    return (
        b.to(tl.int64) * sb
        + y[:, None].to(tl.int64) * sy
        + x[:, None].to(tl.int64) * sx
        + cols[None, :].to(tl.int64) * sc
    )


@triton.jit
def _grid_tile(ptr, strides, b, y, x, exist, cols, D):
    """The (tokens, channels) tile at rows y, columns x of image b, fp32,
    zero where a token does not exist."""
    offsets = _grid_offsets(strides, b, y, x, cols)
    mask = exist[:, None] & (cols[None, :] < D)
    return tl.load(ptr + offsets, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _grid_store(ptr, strides, b, y, x, exist, cols, D, value):
    offsets = _grid_offsets(strides, b, y, x, cols)
    mask = exist[:, None] & (cols[None, :] < D)
    tl.store(ptr + offsets, value.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _shifted_tile(
    ptr, strides, b, tokens, valid, grid_h, grid_w, tap, cols, D
):
    y, x, exist = _shifted(tokens, valid, grid_h, grid_w, tap)
    return _grid_tile(ptr, strides, b, y, x, exist, cols, D)


@triton.jit
def _tap_row(ptr, index, tap, cols, D):
    """Row ``tap`` of (9, d) matrix ``index``, fp32."""
    offsets = index.to(tl.int64) * 9 * D + tap * D + cols
    return tl.load(ptr + offsets, mask=cols < D, other=0.0)


@triton.jit
def _store_taps(ptr, index, taps, cols, D, value):
    """Store the (TAPS, BLOCK_D) tile's first 9 rows as (9, d) matrix
    ``index``."""
    offsets = index.to(tl.int64) * 9 * D + taps[:, None] * D + cols[None, :]
    mask = (taps[:, None] < 9) & (cols[None, :] < D)
    tl.store(ptr + offsets, value, mask=mask)


@triton.jit(do_not_specialize=SIZES + ['splits', 'tiles_per_split'])
def conv_sums_kernel(
    k_ptr, v_ptr, r_ptr, skb, skc, sky, skx, svb, svc, svy, svx,
    D, grid_h, grid_w, N, splits, tiles_per_split,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """R over one token range: grid (B, splits); partial [b, split]."""
    b = tl.program_id(0)
    split = tl.program_id(1)
    k_strides = (skb, skc, sky, skx)
    cols = tl.arange(0, BLOCK_D)
    taps = tl.arange(0, TAPS)
    r = tl.zeros((TAPS, BLOCK_D), tl.float32)
    for t in range(tiles_per_split):
        tokens, valid = _range_tokens(split, t, tiles_per_split, N, BLOCK_N)
        v = _grid_tile(
            v_ptr, (svb, svc, svy, svx), b, tokens // grid_w,
            tokens % grid_w, valid, cols, D,
        )  # fmt: skip
        for tap in tl.static_range(9):
            k = _shifted_tile(
                k_ptr, k_strides, b, tokens, valid, grid_h, grid_w, tap,
                cols, D,
            )  # fmt: skip
            row = tl.sum(k * v, axis=0)
            r += tl.where(taps[:, None] == tap, row[None, :], 0.0)
    _store_taps(r_ptr, b * splits + split, taps, cols, D, r)


@triton.jit(do_not_specialize=SIZES)
def conv_output_kernel(
    q_ptr, o_ptr, w_ptr, sqb, sqc, sqy, sqx, sob, soc, soy, sox,
    D, grid_h, grid_w, N,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """o of one token tile from the stepped W3' (B, 9, d): grid
    (B, tiles)."""
    b = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    tokens, valid = _range_tokens(tl.program_id(1), 0, 1, N, BLOCK_N)
    o = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    for tap in tl.static_range(9):
        q = _shifted_tile(
            q_ptr, (sqb, sqc, sqy, sqx), b, tokens, valid, grid_h, grid_w,
            tap, cols, D,
        )  # fmt: skip
        o += _tap_row(w_ptr, b, tap, cols, D)[None, :] * q
    _grid_store(
        o_ptr, (sob, soc, soy, sox), b, tokens // grid_w, tokens % grid_w,
        valid, cols, D, o,
    )  # fmt: skip


@triton.jit(do_not_specialize=SIZES + ['splits', 'tiles_per_split'])
def conv_query_grad_kernel(
    q_ptr, do_ptr, dq_ptr, w_ptr, dw_ptr,
    sqb, sqc, sqy, sqx, sdob, sdoc, sdoy, sdox, sdqb, sdqc, sdqy, sdqx,
    D, grid_h, grid_w, N, splits, tiles_per_split,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """dq over one token range and its partial dW3': grid (B, splits)."""
    b = tl.program_id(0)
    split = tl.program_id(1)
    q_strides = (sqb, sqc, sqy, sqx)
    do_strides = (sdob, sdoc, sdoy, sdox)
    cols = tl.arange(0, BLOCK_D)
    taps = tl.arange(0, TAPS)
    dw = tl.zeros((TAPS, BLOCK_D), tl.float32)
    for t in range(tiles_per_split):
        tokens, valid = _range_tokens(split, t, tiles_per_split, N, BLOCK_N)
        y, x = tokens // grid_w, tokens % grid_w
        do = _grid_tile(do_ptr, do_strides, b, y, x, valid, cols, D)
        dq = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
        for tap in tl.static_range(9):
            q = _shifted_tile(
                q_ptr, q_strides, b, tokens, valid, grid_h, grid_w, tap,
                cols, D,
            )  # fmt: skip
            row = tl.sum(do * q, axis=0)
            dw += tl.where(taps[:, None] == tap, row[None, :], 0.0)
            do_back = _shifted_tile(
                do_ptr, do_strides, b, tokens, valid, grid_h, grid_w,
                8 - tap, cols, D,
            )  # fmt: skip
            dq += _tap_row(w_ptr, b, tap, cols, D)[None, :] * do_back
        _grid_store(
            dq_ptr, (sdqb, sdqc, sdqy, sdqx), b, y, x, valid, cols, D, dq
        )
    _store_taps(dw_ptr, b * splits + split, taps, cols, D, dw)


@triton.jit(do_not_specialize=SIZES)
def conv_key_value_grad_kernel(
    k_ptr, v_ptr, dk_ptr, dv_ptr, dr_ptr,
    skb, skc, sky, skx, svb, svc, svy, svx,
    sdkb, sdkc, sdky, sdkx, sdvb, sdvc, sdvy, sdvx,
    D, grid_h, grid_w, N,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """dk and dv of one token tile from dR (B, 9, d): grid (B, tiles)."""
    b = tl.program_id(0)
    k_strides = (skb, skc, sky, skx)
    v_strides = (svb, svc, svy, svx)
    cols = tl.arange(0, BLOCK_D)
    tokens, valid = _range_tokens(tl.program_id(1), 0, 1, N, BLOCK_N)
    dk = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    for tap in tl.static_range(9):
        dr = _tap_row(dr_ptr, b, tap, cols, D)[None, :]
        k = _shifted_tile(
            k_ptr, k_strides, b, tokens, valid, grid_h, grid_w, tap, cols, D
        )
        dv += dr * k
        v = _shifted_tile(
            v_ptr, v_strides, b, tokens, valid, grid_h, grid_w, 8 - tap,
            cols, D,
        )  # fmt: skip
        dk += dr * v
    y, x = tokens // grid_w, tokens % grid_w
    _grid_store(dk_ptr, (sdkb, sdkc, sdky, sdkx), b, y, x, valid, cols, D, dk)
    _grid_store(dv_ptr, (sdvb, sdvc, sdvy, sdvx), b, y, x, valid, cols, D, dv)
