"""Triton kernels of a depthwise KS x KS convolution on a token grid
(zero padding KS // 2, stride 1), forward and both gradients.

On an H x W grid of C channels, tap t = KS * a + c shifts a grid point p
by (a - KS // 2, c - KS // 2); nbr_t(p) is p shifted by it (zero outside
the grid), and the tap KS^2 - 1 - t undoes the shift. With weights w
(KS^2, C) per image or shared:

- :func:`conv_kernel`: y[p] = sum_t w[t] * x[nbr_t(p)] (+ bias) for one
  tile of tokens and channels; with ``FLIP`` the data gradient
  dx[p] = sum_t w[t] * g[nbr_{KS^2-1-t}(p)];
- :func:`weight_grad_kernel`: dw[t] = sum_p g[p] * x[nbr_t(p)] over a
  token range (partial sums per image and split).

Grid tensors are addressed through (batch, channel, row, column) strides,
so (B, C, H, W) views of token-major (B, H*W, C) tensors (a ``qkv``
projection's slices) are read in place. Weights, bias and partial sums are
fp32 and contiguous: weights (B or 1, KS^2, C), partials
(B, splits, KS^2, C). Every product and sum is fp32 in registers; inputs
and outputs keep their dtype.
"""

import triton
import triton.language as tl

from .tiles import _range_tokens

# Not specialised on, as in common.linear_kernels: the channel count C is.
SIZES = ['grid_h', 'grid_w', 'N']


@triton.jit
def _grid_offsets(sc, sy, sx, y, x, cols):
    """Offsets of (rows y, columns x) x channels within one image."""
    return (
        y[:, None].to(tl.int64) * sy
        + x[:, None].to(tl.int64) * sx
        + cols[None, :].to(tl.int64) * sc
    )


@triton.jit
def _shifted_tile(
    ptr, sc, sy, sx, tokens, valid, grid_h, grid_w, tap, cols, C,
    KS: tl.constexpr,
):  # fmt: skip
    """The (tokens, channels) tile of the image at ``ptr`` at the tokens
    shifted by ``tap``, fp32, zero off the grid."""
    y = tokens // grid_w + tap // KS - KS // 2
    x = tokens % grid_w + tap % KS - KS // 2
    inside = valid & (y >= 0) & (y < grid_h) & (x >= 0) & (x < grid_w)
    offsets = _grid_offsets(sc, sy, sx, y, x, cols)
    mask = inside[:, None] & (cols[None, :] < C)
    return tl.load(ptr + offsets, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _store_tile(ptr, sc, sy, sx, tokens, valid, grid_w, cols, C, value):
    y, x = tokens // grid_w, tokens % grid_w
    offsets = _grid_offsets(sc, sy, sx, y, x, cols)
    mask = valid[:, None] & (cols[None, :] < C)
    tl.store(ptr + offsets, value.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _tap_row(ptr, index, tap, cols, C, KS: tl.constexpr):
    """Row ``tap`` of (KS^2, C) weights ``index``, fp32."""
    offsets = index.to(tl.int64) * KS * KS * C + tap * C + cols
    return tl.load(ptr + offsets, mask=cols < C, other=0.0)


@triton.jit
def _weighted_taps(
    x_ptr, sc, sy, sx, w_ptr, w_index, tokens, valid, grid_h, grid_w,
    cols, C, FLIP: tl.constexpr, KS: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_C: tl.constexpr,
):  # fmt: skip
    """sum_t w[t] * x[nbr_t(p)] (``FLIP``: at the undoing taps) of one
    tile of the image at ``x_ptr``, fp32."""
    acc = tl.zeros((BLOCK_N, BLOCK_C), tl.float32)
    # A loop, not unrolled here: unrolled, the 5x5 kernels hoist all 25
    # taps' loads and spill; the compiler unrolls the 3x3 conv's 9 itself.
    for tap in range(KS * KS):
        at = KS * KS - 1 - tap if FLIP else tap
        x = _shifted_tile(
            x_ptr, sc, sy, sx, tokens, valid, grid_h, grid_w, at, cols, C, KS
        )
        acc += _tap_row(w_ptr, w_index, tap, cols, C, KS)[None, :] * x
    return acc


@triton.jit(do_not_specialize=SIZES)
def conv_kernel(
    x_ptr, y_ptr, w_ptr, bias_ptr,
    sxb, sxc, sxy, sxx, syb, syc, syy, syx,
    C, grid_h, grid_w, N,
    PER_IMAGE: tl.constexpr, HAS_BIAS: tl.constexpr, FLIP: tl.constexpr,
    KS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """y (or, with ``FLIP``, the data gradient) of one tile: grid
    (B, token tiles, channel blocks)."""
    b = tl.program_id(0)
    tokens, valid = _range_tokens(tl.program_id(1), 0, 1, N, BLOCK_N)
    cols = tl.program_id(2) * BLOCK_C + tl.arange(0, BLOCK_C)
    y = _weighted_taps(
        x_ptr + b.to(tl.int64) * sxb, sxc, sxy, sxx, w_ptr,
        b if PER_IMAGE else b * 0, tokens, valid, grid_h, grid_w, cols, C,
        FLIP, KS, BLOCK_N, BLOCK_C,
    )  # fmt: skip
    if HAS_BIAS:
        y += tl.load(bias_ptr + cols, mask=cols < C, other=0.0)[None, :]
    y_ptr += b.to(tl.int64) * syb
    _store_tile(y_ptr, syc, syy, syx, tokens, valid, grid_w, cols, C, y)


@triton.jit(do_not_specialize=SIZES + ['splits', 'tiles_per_split'])
def weight_grad_kernel(
    x_ptr, g_ptr, dw_ptr,
    sxb, sxc, sxy, sxx, sgb, sgc, sgy, sgx,
    C, grid_h, grid_w, N, splits, tiles_per_split,
    KS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """dw over one token range of one image: grid
    (B, splits, channel blocks); partial [b, split]. Tap by tap, the
    products g * x of the range's tiles add up as whole tiles and are
    summed over their tokens once a tap: a sum over a tile's tokens is a
    reduction across the program's warps, which a tile at a time ran
    tiles x KS^2 times (tools/analysis/kernel_resources.py --loops)."""
    b = tl.program_id(0)
    split = tl.program_id(1)
    cols = tl.program_id(2) * BLOCK_C + tl.arange(0, BLOCK_C)
    x_ptr += b.to(tl.int64) * sxb
    g_ptr += b.to(tl.int64) * sgb
    dw_ptr += (b * splits + split).to(tl.int64) * KS * KS * C + cols
    for tap in range(KS * KS):  # a loop, as in _weighted_taps
        acc = tl.zeros((BLOCK_N, BLOCK_C), tl.float32)
        for t in range(tiles_per_split):
            tokens, valid = _range_tokens(
                split, t, tiles_per_split, N, BLOCK_N
            )
            # g at the centre tap: the tokens themselves.
            g = _shifted_tile(
                g_ptr, sgc, sgy, sgx, tokens, valid, grid_h, grid_w,
                KS * KS // 2, cols, C, KS,
            )  # fmt: skip
            x = _shifted_tile(
                x_ptr, sxc, sxy, sxx, tokens, valid, grid_h, grid_w, tap,
                cols, C, KS,
            )  # fmt: skip
            acc += g * x
        tl.store(dw_ptr + tap * C, tl.sum(acc, axis=0), mask=cols < C)
