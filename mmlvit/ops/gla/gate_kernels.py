"""Triton kernels of GLA's log-gates from the low-rank gate projection:
with x (B, N, C) the tokens, f = x W_down^T (B, N, R) the features,
W (2 C, R) and b (2 C,) the up-projection and l = f W^T + b the logits
(never stored),

- :func:`gate_features_kernel`: f in fp32 from x in its own dtype (no
  fp32 copy of x); :func:`gate_features_grad_kernel`, given df: dx = df
  W_down in x's dtype and partial sums of dW_down = df^T x;
- :func:`log_gate_kernel`: g = logsigmoid(l) / T;
- :func:`log_gate_grad_kernel`, for one scan direction's dg: dl = dg
  sigmoid(-l) / T, and per program the partial sums of the inputs'
  gradients, df = dl W (over the program's d channels), dW = dl^T f and
  db = sum dl (over its tokens).

A feature program takes ``BLOCK_M`` token rows (and, backward,
``BLOCK_C`` channels) of contiguous x, f, W_down, with fp32 products: one
``input_precision='ieee'`` product per block of channels forward, one
feature at a time backward. A log-gate program takes ``BLOCK_N`` tokens
of one head of width D; its channels are ``head * D + [0, D)`` of the
2 C, the forward direction's heads first. f, W, b and g are contiguous;
dg is a (B, H, N, D) view addressed through (batch, head, token) strides
with unit channel stride. The R-term products run as R fp32
multiply-adds of a column of f by a row of W (R is small: 16 by
default), everything in fp32 registers.
"""

import triton
import triton.language as tl

from ..fused_linear.kernels import _tile
from ..gated_norm.kernels import _rows

# Sizes that vary between calls are not specialised on; the head width D
# is (a multiple of 16: rows load as 16-byte vectors).
SIZES = ['B', 'H', 'N']


@triton.jit
def _logits(
    f_ptr, w_ptr, b_ptr, rows, valid, channels, inside, R: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """l = f[rows] W[channels]^T + b[channels], fp32 (BLOCK_N, BLOCK_D)."""
    bias = tl.load(b_ptr + channels, mask=inside, other=0.0).to(tl.float32)
    logits = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32) + bias[None, :]
    for j in range(R):
        f = tl.load(f_ptr + rows * R + j, mask=valid, other=0.0)
        w = tl.load(w_ptr + channels * R + j, mask=inside, other=0.0)
        logits += f.to(tl.float32)[:, None] * w.to(tl.float32)[None, :]
    return logits


@triton.jit(do_not_specialize=SIZES)
def log_gate_kernel(
    f_ptr, w_ptr, b_ptr, g_ptr, H, N, D, inv_temperature,
    R: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """Grid (cdiv(N, BLOCK_N), B * 2 H): both directions' heads."""
    bh, tokens, valid, cols = _rows(N, BLOCK_N, BLOCK_D)
    heads = 2 * H
    rows = (bh // heads).to(tl.int64) * N + tokens
    channels = (bh % heads) * D + cols
    inside = cols < D
    logits = _logits(
        f_ptr, w_ptr, b_ptr, rows, valid, channels, inside, R,
        BLOCK_N, BLOCK_D,
    )  # fmt: skip
    # logsigmoid(l) = min(l, 0) - log(1 + exp(-|l|)), exact for any l.
    soft = tl.log(1.0 + tl.exp(-tl.abs(logits)))
    g = (tl.minimum(logits, 0.0) - soft) * inv_temperature
    offsets = rows[:, None] * (heads * D) + channels[None, :]
    mask = valid[:, None] & inside[None, :]
    tl.store(g_ptr + offsets, g.to(g_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=SIZES)
def log_gate_grad_kernel(
    f_ptr, w_ptr, b_ptr, dg_ptr, df_ptr, dw_ptr, db_ptr,
    sgb, sgh, sgn, B, H, N, D, direction, inv_temperature,
    R: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """Grid (cdiv(N, BLOCK_N), B * H), the heads of ``direction`` (0:
    forward, 1: backward). Partial sums, fp32: df (2 H, B N, R), one per
    head; dW (cdiv(N, BLOCK_N), B, 2 C, R) and db (cdiv(N, BLOCK_N), B,
    2 C), one per token tile and image."""
    bh, tokens, valid, cols = _rows(N, BLOCK_N, BLOCK_D)
    head = direction * H + bh % H
    rows = (bh // H).to(tl.int64) * N + tokens
    channels = head * D + cols
    inside = cols < D
    logits = _logits(
        f_ptr, w_ptr, b_ptr, rows, valid, channels, inside, R,
        BLOCK_N, BLOCK_D,
    )  # fmt: skip
    dg = _tile(dg_ptr, sgb, sgh, sgn, bh, H, tokens, valid, cols, D)
    # sigmoid(-l) from exp(-|l|), which cannot overflow; dl is zero
    # outside the tile's tokens and channels, as dg is.
    e = tl.exp(-tl.abs(logits))
    dl = dg * (tl.where(logits > 0, e, 1.0) / (1.0 + e)) * inv_temperature
    # This tile's rows of its head's df, and its (image, tile) slot of dW.
    df_rows = head.to(tl.int64) * B * N + rows
    slot = tl.program_id(0).to(tl.int64) * B + bh // H
    dw_rows = slot * (2 * H * D) + channels
    for j in range(R):
        w = tl.load(w_ptr + channels * R + j, mask=inside, other=0.0)
        df = tl.sum(dl * w.to(tl.float32)[None, :], 1)
        tl.store(df_ptr + df_rows * R + j, df, mask=valid)
        f = tl.load(f_ptr + rows * R + j, mask=valid, other=0.0)
        dw = tl.sum(dl * f.to(tl.float32)[:, None], 0)
        tl.store(dw_ptr + dw_rows * R + j, dw, mask=inside)
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
        x = tl.load(
            x_ptr + rows[:, None] * C + channels[None, :],
            mask=valid[:, None] & inside[None, :],
            other=0.0,
        ).to(tl.float32)
        w = tl.load(
            w_ptr + ranks[None, :] * C + channels[:, None],
            mask=inside[:, None] & ranked[None, :],
            other=0.0,
        ).to(tl.float32)
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
):  # fmt: skip
    """Given df (M, R): dx = df W_down in fp32, stored in dx's dtype, and
    this program's partial sum of dW_down = df^T x, fp32 (cdiv(M,
    BLOCK_M), R, C), for ``BLOCK_M`` rows and ``BLOCK_C`` channels, one
    feature at a time (R multiply-adds and R column sums). Grid (cdiv(M,
    BLOCK_M), cdiv(C, BLOCK_C))."""
    rows, valid, _, _, cols = _feature_tiles(M, R, BLOCK_M, BLOCK_C, BLOCK_R)
    channels = tl.program_id(1) * BLOCK_C + cols
    inside = channels < C
    tokens = valid[:, None] & inside[None, :]
    x_offsets = rows[:, None] * C + channels[None, :]
    x = tl.load(x_ptr + x_offsets, mask=tokens, other=0.0).to(tl.float32)
    dx = tl.zeros([BLOCK_M, BLOCK_C], dtype=tl.float32)
    slot = tl.program_id(0).to(tl.int64) * R
    for j in range(R):
        df = tl.load(df_ptr + rows * R + j, mask=valid, other=0.0)
        df = df.to(tl.float32)
        w = tl.load(w_ptr + j * C + channels, mask=inside, other=0.0)
        dx += df[:, None] * w.to(tl.float32)[None, :]
        dw = tl.sum(df[:, None] * x, 0)
        tl.store(dw_ptr + (slot + j) * C + channels, dw, mask=inside)
    tl.store(dx_ptr + x_offsets, dx.to(dx_ptr.dtype.element_ty), mask=tokens)
