"""Triton kernels of GLA's log-gates from the low-rank gate projection:
with f (B, N, R) its features, W (2 C, R) and b (2 C,) the up-projection
and l = f W^T + b the logits (never stored),

- :func:`log_gate_kernel`: g = logsigmoid(l) / T;
- :func:`log_gate_grad_kernel`, for one scan direction's dg: dl = dg
  sigmoid(-l) / T, and per program the partial sums of the inputs'
  gradients, df = dl W (over the program's d channels), dW = dl^T f and
  db = sum dl (over its tokens).

A program takes ``BLOCK_N`` tokens of one head of width D; its channels
are ``head * D + [0, D)`` of the 2 C, the forward direction's heads first.
f, W, b and g are contiguous; dg is a (B, H, N, D) view addressed through
(batch, head, token) strides with unit channel stride. The R-term
products run as R fp32 multiply-adds of a column of f by a row of W (R is
small: 16 by default), everything in fp32 registers.
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
    for j in tl.static_range(R):
        w = tl.load(w_ptr + channels * R + j, mask=inside, other=0.0)
        df = tl.sum(dl * w.to(tl.float32)[None, :], 1)
        tl.store(df_ptr + df_rows * R + j, df, mask=valid)
        f = tl.load(f_ptr + rows * R + j, mask=valid, other=0.0)
        dw = tl.sum(dl * f.to(tl.float32)[:, None], 0)
        tl.store(dw_ptr + dw_rows * R + j, dw, mask=inside)
    tl.store(db_ptr + dw_rows, tl.sum(dl, 0), mask=inside)
