"""Triton kernels of GLA's log-gates from the low-rank gate projection:
with x (B, N, C) the tokens, f = x W_down^T (B, N, R) the features,
W (2 C, R) and b (2 C,) the up-projection and l = f W^T + b the logits
(never stored),

- :func:`gate_features_kernel`: f in fp32 from x in its own dtype (no
  fp32 copy of x); :func:`gate_features_grad_kernel`, given df: dx = df
  W_down in x's dtype and partial sums of dW_down = df^T x;
- :func:`log_gate_kernel`: g = logsigmoid(l) / T or, with CUMULATIVE,
  its cumulative sums within the program's ``BLOCK_N`` tokens (a chunk
  of the fused scan, :func:`~.gates.within_chunks`): from their first
  token for the forward heads, from their last for the backward ones;
- :func:`log_gate_grad_kernel`, for one scan direction's dg (with
  CUMULATIVE, the gradient of those sums, summed back over the chunk
  first): dl = dg sigmoid(-l) / T, and per program the partial sums of
  the inputs' gradients, df = dl W (over the program's d channels), dW =
  dl^T f and db = sum dl (over its tokens).

A feature program takes ``BLOCK_M`` token rows (and, backward,
``BLOCK_C`` channels) of contiguous x, f, W_down. A log-gate program
takes ``BLOCK_N`` tokens of one head of width D; its channels are
``head * D + [0, D)`` of the 2 C, the forward direction's heads first.
f, W, b and g are contiguous; dg is a (B, H, N, D) view addressed
through (batch, head, token) strides with unit channel stride. The rank
R is padded to ``BLOCK_R`` (a power of two, at least 16) and masked.
Every product is one ``tl.dot`` with fp32 operands, everything else fp32
in registers. One product per tile instead of R multiply-adds of a
column by a row, and R column sums, runs 2.6x (forward) to 5.5x
(feature gradient) fewer instructions a warp on sm_90
(tools/analysis/kernel_resources.py --loops). The forward products (the
features, the logits) run at ``input_precision='ieee'`` (fp32
multiply-adds, as PyTorch's fp32 products); the gradients' (df, dW, dx,
dW_down) at the launch's ``PRECISION``: 'ieee' or 'tf32x3', three tf32
tensor-core products of each operand's high and low parts (a = a_hi +
a_lo; a_lo b_hi + a_hi b_lo + a_hi b_hi), within about 2^-21 |a| |b| a
term of the exact product where an fp32 multiply-add is within 2^-24
(see :mod:`.gates` for where each is used).
"""

import triton
import triton.language as tl

from ..common.tiles import _tile
from ..common.triton_math import exp, log

# Sizes that vary between calls are not specialised on; the head width D
# is (a multiple of 16: rows load as 16-byte vectors).
SIZES = ['B', 'H', 'N']


@triton.jit
def _matrix(ptr, rows, cols, row_stride, col_stride, row_mask, col_mask):
    """The fp32 tile ``ptr[rows * row_stride + cols * col_stride]``, zero
    where either mask is off."""
    offsets = rows[:, None] * row_stride + cols[None, :] * col_stride
    mask = row_mask[:, None] & col_mask[None, :]
    return tl.load(ptr + offsets, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _gate_operands(
    f_ptr, w_ptr, rows, valid, channels, inside, R,
    BLOCK_R: tl.constexpr,
):  # fmt: skip
    """The (BLOCK_N, BLOCK_R) tile of f's rows and the (BLOCK_R, BLOCK_D)
    tile of W^T's channels, fp32, zero outside R, the rows and the
    channels."""
    ranks = tl.arange(0, BLOCK_R)
    ranked = ranks < R
    f = _matrix(f_ptr, rows, ranks, R, 1, valid, ranked)
    w = _matrix(w_ptr, ranks, channels, 1, R, ranked, inside)
    return f, w, ranks, ranked


@triton.jit
def _logits(f, w, b_ptr, channels, inside):
    """l = f W^T + b, fp32 (BLOCK_N, BLOCK_D), from the operand tiles."""
    bias = tl.load(b_ptr + channels, mask=inside, other=0.0).to(tl.float32)
    return tl.dot(f, w, input_precision='ieee') + bias[None, :]


@triton.jit
def _chunk_rows(
    N, reverse, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    CUMULATIVE: tl.constexpr,
):  # fmt: skip
    """This program's ``BLOCK_N`` tokens, which of them exist, and the
    channels. With CUMULATIVE and ``reverse``, the tokens are in reverse
    order (the chunk's last first), so that a reverse sum over the tokens
    is a forward one down the rows: a reverse ``tl.cumsum`` ran about
    twice the instructions of a forward one (sm_90)."""
    rows = tl.arange(0, BLOCK_N)
    if CUMULATIVE:
        rows = rows ^ tl.where(reverse, BLOCK_N - 1, 0)
    tokens = tl.program_id(0) * BLOCK_N + rows
    return tokens, tokens < N, tl.arange(0, BLOCK_D)


@triton.jit(do_not_specialize=SIZES)
def log_gate_kernel(
    f_ptr, w_ptr, b_ptr, g_ptr, H, N, D, R, inv_temperature,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr,
    CUMULATIVE: tl.constexpr,
):  # fmt: skip
    """Grid (cdiv(N, BLOCK_N), B * 2 H): both directions' heads."""
    bh = tl.program_id(1)
    heads = 2 * H
    tokens, valid, cols = _chunk_rows(
        N, bh % heads >= H, BLOCK_N, BLOCK_D, CUMULATIVE
    )
    rows = (bh // heads).to(tl.int64) * N + tokens
    channels = (bh % heads) * D + cols
    inside = cols < D
    f, w, _, _ = _gate_operands(
        f_ptr, w_ptr, rows, valid, channels, inside, R, BLOCK_R
    )
    logits = _logits(f, w, b_ptr, channels, inside)
    # logsigmoid(l) = min(l, 0) - log(1 + exp(-|l|)), exact for any l;
    # 1 + exp(-|l|) is in (1, 2], where triton_math.log is MUFU.LG2.
    soft = log(1.0 + exp(-tl.abs(logits)))
    g = (tl.minimum(logits, 0.0) - soft) * inv_temperature
    if CUMULATIVE:  # over the tokens there are, in the rows' order
        g = tl.cumsum(tl.where(valid[:, None], g, 0.0), 0)
    offsets = rows[:, None] * (heads * D) + channels[None, :]
    mask = valid[:, None] & inside[None, :]
    tl.store(g_ptr + offsets, g.to(g_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=SIZES)
def log_gate_grad_kernel(
    f_ptr, w_ptr, b_ptr, dg_ptr, df_ptr, dw_ptr, db_ptr,
    sgb, sgh, sgn, B, H, N, D, R, inv_temperature,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr,
    CUMULATIVE: tl.constexpr, DIRECTION: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    """Grid (cdiv(N, BLOCK_N), B * H), the heads of ``DIRECTION`` (0:
    forward, 1: backward). Partial sums, fp32: df (2 H, B N, R), one per
    head; dW (cdiv(N, BLOCK_N), B, 2 C, R) and db (cdiv(N, BLOCK_N), B,
    2 C), one per token tile and image."""
    bh = tl.program_id(1)
    # A forward gate's sum runs to the chunk's end: its rows reversed.
    tokens, valid, cols = _chunk_rows(
        N, DIRECTION == 0, BLOCK_N, BLOCK_D, CUMULATIVE
    )
    head = DIRECTION * H + bh % H
    rows = (bh // H).to(tl.int64) * N + tokens
    channels = head * D + cols
    inside = cols < D
    f, w, ranks, ranked = _gate_operands(
        f_ptr, w_ptr, rows, valid, channels, inside, R, BLOCK_R
    )
    logits = _logits(f, w, b_ptr, channels, inside)
    dg = _tile(dg_ptr, sgb, sgh, sgn, bh, H, tokens, valid, cols, D)
    if CUMULATIVE:  # g_t is in the sums at t and after (before, backward)
        # (rows past the tokens there are, last in the backward
        # direction's order, would carry the sum)
        dg = tl.where(valid[:, None], tl.cumsum(dg, 0), 0.0)
    # sigmoid(-l) from exp(-|l|), which cannot overflow; dl is zero
    # outside the tile's tokens and channels, as dg is.
    e = exp(-tl.abs(logits))
    dl = dg * (tl.where(logits > 0, e, 1.0) / (1.0 + e)) * inv_temperature
    # This tile's rows of its head's df, and its (image, tile) slot of dW.
    df = tl.dot(dl, tl.trans(w), input_precision=PRECISION)
    df_rows = head.to(tl.int64) * B * N + rows
    tl.store(
        df_ptr + df_rows[:, None] * R + ranks[None, :],
        df,
        mask=valid[:, None] & ranked[None, :],
    )
    slot = tl.program_id(0).to(tl.int64) * B + bh // H
    dw_rows = slot * (2 * H * D) + channels
    dw = tl.dot(tl.trans(dl), f, input_precision=PRECISION)
    tl.store(
        dw_ptr + dw_rows[:, None] * R + ranks[None, :],
        dw,
        mask=inside[:, None] & ranked[None, :],
    )
    tl.store(db_ptr + dw_rows, tl.sum(dl, 0), mask=inside)


@triton.jit
def _feature_tiles(
    M, R, BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr
):
    """This program's token rows (int64) and which exist, the feature
    columns and which exist, and the channels of a C-block at 0."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    ranks = tl.arange(0, BLOCK_R)
    return rows, rows < M, ranks, ranks < R, tl.arange(0, BLOCK_C)


@triton.jit(do_not_specialize=['M'])
def gate_features_kernel(
    x_ptr, w_ptr, f_ptr, M, C, R,
    BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
):  # fmt: skip
    """f = x W_down^T for ``BLOCK_M`` token rows of x (M, C) in any dtype
    and W_down (R, C) fp32, with fp32 products and sums (x upcast in
    registers); f (M, R). Grid (cdiv(M, BLOCK_M),)."""
    rows, valid, ranks, ranked, cols = _feature_tiles(
        M, R, BLOCK_M, BLOCK_C, BLOCK_R
    )
    f = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        channels = c0 + cols
        inside = channels < C
        x = _matrix(x_ptr, rows, channels, C, 1, valid, inside)
        w = _matrix(w_ptr, channels, ranks, 1, C, inside, ranked)
        f += tl.dot(x, w, input_precision='ieee')
    tl.store(
        f_ptr + rows[:, None] * R + ranks[None, :],
        f.to(f_ptr.dtype.element_ty),
        mask=valid[:, None] & ranked[None, :],
    )


@triton.jit(do_not_specialize=['M'])
def gate_features_grad_kernel(
    x_ptr, w_ptr, df_ptr, dx_ptr, dw_ptr, M, C, R,
    BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    """Given df (M, R): dx = df W_down in fp32, stored in dx's dtype, and
    this program's partial sum of dW_down = df^T x, fp32 (cdiv(M,
    BLOCK_M), R, C), for ``BLOCK_M`` rows and ``BLOCK_C`` channels. Grid
    (cdiv(M, BLOCK_M), cdiv(C, BLOCK_C))."""
    rows, valid, ranks, ranked, cols = _feature_tiles(
        M, R, BLOCK_M, BLOCK_C, BLOCK_R
    )
    channels = tl.program_id(1) * BLOCK_C + cols
    inside = channels < C
    df = _matrix(df_ptr, rows, ranks, R, 1, valid, ranked)
    w = _matrix(w_ptr, ranks, channels, C, 1, ranked, inside)
    tokens = valid[:, None] & inside[None, :]
    x_offsets = rows[:, None] * C + channels[None, :]
    dx = tl.dot(df, w, input_precision=PRECISION)
    tl.store(dx_ptr + x_offsets, dx.to(dx_ptr.dtype.element_ty), mask=tokens)
    x = _matrix(x_ptr, rows, channels, C, 1, valid, inside)
    dw = tl.dot(tl.trans(df), x, input_precision=PRECISION)
    slot = tl.program_id(0).to(tl.int64) * R + ranks
    tl.store(
        dw_ptr + slot[:, None] * C + channels[None, :],
        dw,
        mask=ranked[:, None] & inside[None, :],
    )
