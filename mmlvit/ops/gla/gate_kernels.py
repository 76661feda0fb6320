"""Triton kernels of GLA's log-gates, ``logsigmoid((x W_down^T) W^T + b) /
T`` without storing the logits (the features f = x W_down^T, then the
gates or, with CUMULATIVE, their sums within chunks; gradients as
per-program partial sums), and of its gated RMSNorm, ``w rms_norm(o)
silu(z)`` per token and head (launched by :class:`RowLaunch`). Programs
take one head's tokens through (batch, head, token) strides, unit
channel stride; arithmetic is fp32 in registers. Choices: README.md."""

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..common.linear_launch import _strides, _unit_last_stride, _width
from ..common.tiles import _store, _tile
from ..common.triton_math import _silu_terms, exp, log
from ..common.triton_runtime import fused_entry

# Sizes not specialised on; the head width D is (a multiple of 16).
SIZES = ['B', 'H', 'N']


@triton.jit
def _matrix(ptr, rows, cols, row_stride, col_stride, row_mask, col_mask):
    """The fp32 tile ``ptr[rows, cols]``, zero where either mask is off."""
    offsets = rows[:, None] * row_stride + cols[None, :] * col_stride
    mask = row_mask[:, None] & col_mask[None, :]
    return tl.load(ptr + offsets, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _gate_operands(
    f_ptr, w_ptr, rows, valid, channels, inside, R,
    BLOCK_R: tl.constexpr,
):  # fmt: skip
    """f's rows and W^T's channels, fp32 tiles zero outside."""
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
    """This program's tokens (reversed with CUMULATIVE and ``reverse``: a
    forward ``tl.cumsum`` is cheaper), which exist, and the channels."""
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
    # logsigmoid(l) = min(l, 0) - log(1 + exp(-|l|)), exact for any l.
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
    """Grid (cdiv(N, BLOCK_N), B * H), the heads of ``DIRECTION``. Partial
    sums, fp32: df (2 H, B N, R), dW (tiles, B, 2 C, R), db (tiles, B, 2 C)."""
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
        dg = tl.where(valid[:, None], tl.cumsum(dg, 0), 0.0)
    # sigmoid(-l) from exp(-|l|), which cannot overflow.
    e = exp(-tl.abs(logits))
    dl = dg * (tl.where(logits > 0, e, 1.0) / (1.0 + e)) * inv_temperature
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
    """This program's token rows, feature columns and their masks."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    ranks = tl.arange(0, BLOCK_R)
    return rows, rows < M, ranks, ranks < R, tl.arange(0, BLOCK_C)


@triton.jit(do_not_specialize=['M'])
def gate_features_kernel(
    x_ptr, w_ptr, f_ptr, M, C, R,
    BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_R: tl.constexpr,
):  # fmt: skip
    """f = x W_down^T, fp32 (M, R), x (M, C). Grid (cdiv(M, BLOCK_M),)."""
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
    """dx = df W_down in dx's dtype and this program's partial sum of
    dW_down, fp32 (tiles, R, C). Grid (cdiv(M, BLOCK_M), cdiv(C, BLOCK_C))."""
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


# The gated norm's sizes not specialised on, its tokens a program and
# warps (bound by memory, README.md).
NORM_SIZES = ['H', 'N']
BLOCK_N = 64
NUM_WARPS = 8


@triton.jit
def _rows(N, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """This program's head ``bh``, tokens, which exist, and the channels."""
    tokens = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    return tl.program_id(1), tokens, tokens < N, tl.arange(0, BLOCK_D)


@triton.jit
def _normalised(
    o_ptr, sob, soh, son, w_ptr, bh, H, tokens, valid, cols, D, eps
):  # fmt: skip
    """(o_hat, r, w): rows of o at unit root mean square, their scales,
    and w as fp32."""
    o = _tile(o_ptr, sob, soh, son, bh, H, tokens, valid, cols, D)
    r = 1.0 / tl.sqrt(tl.sum(o * o, 1) / D + eps)
    w = tl.load(w_ptr + cols, mask=cols < D, other=0.0).to(tl.float32)
    return o * r[:, None], r, w


@triton.jit(do_not_specialize=NORM_SIZES)
def gated_norm_kernel(
    o_ptr, z_ptr, w_ptr, y_ptr,
    sob, soh, son, szb, szh, szn, syb, syh, syn,
    H, N, D, eps,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    bh, tokens, valid, cols = _rows(N, BLOCK_N, BLOCK_D)
    o_hat, _, w = _normalised(
        o_ptr, sob, soh, son, w_ptr, bh, H, tokens, valid, cols, D, eps
    )
    z = _tile(z_ptr, szb, szh, szn, bh, H, tokens, valid, cols, D)
    silu, _ = _silu_terms(z)
    y = o_hat * w[None, :] * silu
    _store(y_ptr, syb, syh, syn, bh, H, tokens, valid, cols, D, y)


@triton.jit(do_not_specialize=NORM_SIZES)
def gated_norm_grad_kernel(
    o_ptr, z_ptr, w_ptr, dy_ptr, do_ptr, dz_ptr, dw_ptr,
    sob, soh, son, szb, szh, szn, syb, syh, syn,
    sdob, sdoh, sdon, sdzb, sdzh, sdzn,
    H, N, D, eps,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    bh, tokens, valid, cols = _rows(N, BLOCK_N, BLOCK_D)
    o_hat, r, w = _normalised(
        o_ptr, sob, soh, son, w_ptr, bh, H, tokens, valid, cols, D, eps
    )
    z = _tile(z_ptr, szb, szh, szn, bh, H, tokens, valid, cols, D)
    dy = _tile(dy_ptr, syb, syh, syn, bh, H, tokens, valid, cols, D)
    silu, silu_grad = _silu_terms(z)
    dz = dy * o_hat * w[None, :] * silu_grad
    d_weighted = dy * silu  # d(w o_hat)
    d_hat = d_weighted * w[None, :]
    do = r[:, None] * (d_hat - o_hat * (tl.sum(d_hat * o_hat, 1) / D)[:, None])
    _store(do_ptr, sdob, sdoh, sdon, bh, H, tokens, valid, cols, D, do)
    _store(dz_ptr, sdzb, sdzh, sdzn, bh, H, tokens, valid, cols, D, dz)
    program = bh * tl.num_programs(0) + tl.program_id(0)
    dw = tl.sum(d_weighted * o_hat, 0)
    tl.store(dw_ptr + program.to(tl.int64) * BLOCK_D + cols, dw)


def _heads(t, num_heads):
    """A token-major (B, N, H d) tensor as a (B, H, N, d) view."""
    return _unit_last_stride(t).unflatten(-1, (num_heads, -1)).transpose(1, 2)


def _empty_rows(like, num_heads, width, dtype):
    """An empty token-major (B, N, H width) tensor and its head view."""
    B, N = like.shape[0], like.shape[2]
    out = torch.empty(B, N, num_heads * width, dtype=dtype, device=like.device)
    return out, _heads(out, num_heads)


class RowLaunch:
    """Grid and compile-time options of one call on o (B, H, N, d)."""

    def __init__(self, o):
        self.B, self.H, self.N, self.D = o.shape
        self.grid = (triton.cdiv(self.N, BLOCK_N), self.B * self.H)
        self.constants = dict(
            BLOCK_N=BLOCK_N, BLOCK_D=_width(self.D), num_warps=NUM_WARPS
        )

    def forward(self, o, gate, weight, eps):
        """y (B, N, H d) in the gate's dtype."""
        z = _heads(gate, self.H)
        y, y_heads = _empty_rows(o, self.H, self.D, gate.dtype)
        gated_norm_kernel[self.grid](
            o, z, weight, y_heads, *_strides(o), *_strides(z),
            *_strides(y_heads), self.H, self.N, self.D, eps, **self.constants,
        )  # fmt: skip
        return y

    def backward(self, o, gate, weight, dy, eps):
        """do (B, H, N, d) in o's dtype, d_gate (B, N, H d) in the gate's,
        dw (d,) fp32."""
        z, dy_heads = _heads(gate, self.H), _heads(dy, self.H)
        do = torch.empty_like(o)
        d_gate, dz = _empty_rows(o, self.H, self.D, gate.dtype)
        programs = self.grid[0] * self.grid[1]
        width = self.constants['BLOCK_D']
        dw = torch.empty(programs, width, device=o.device)
        gated_norm_grad_kernel[self.grid](
            o, z, weight, dy_heads, do, dz, dw,
            *_strides(o), *_strides(z), *_strides(dy_heads), *_strides(do),
            *_strides(dz), self.H, self.N, self.D, eps, **self.constants,
        )  # fmt: skip
        return do, d_gate, dw.sum(0)[: self.D]


class GatedRMSNorm(torch.autograd.Function):
    """o (B, H, N, d), gate (B, N, H d), weight (d,) -> y (B, N, H d) in
    the gate's dtype; saves its inputs."""

    @staticmethod
    def forward(ctx, o, gate, weight, eps):
        o = _unit_last_stride(o)
        launch = RowLaunch(o)
        fp32_weight = weight.float().contiguous()
        ctx.save_for_backward(o, gate, fp32_weight)
        ctx.launch, ctx.eps, ctx.weight_dtype = launch, eps, weight.dtype
        return launch.forward(o, gate, fp32_weight, eps)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        o, gate, weight = ctx.saved_tensors
        do, d_gate, dw = ctx.launch.backward(o, gate, weight, dy, ctx.eps)
        return do, d_gate, dw.to(ctx.weight_dtype), None


@fused_entry
def fused_gated_rms_norm(
    o: Tensor, gate: Tensor, weight: Tensor, eps: float
) -> Tensor:
    """``merge_heads(rms_norm(o) * weight) * silu(gate)`` by the fused
    kernels: o (B, H, N, d), gate (B, N, H d) -> (B, N, H d), gate's dtype."""
    return GatedRMSNorm.apply(o, gate, weight, eps)
