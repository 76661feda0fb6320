"""Triton kernels of the gated RMSNorm that follows GLA's scan.

A row is one token of one head: o (d,) of the scan's output and the
matching d channels z of the output gate. With r = (mean_j o_j^2 + eps)^-1/2,
o_hat = r o, a = w o_hat and silu(z) = z sigmoid(z):

- :func:`gated_norm_kernel`: y = a silu(z);
- :func:`gated_norm_grad_kernel`, given dy: dz = dy a silu'(z),
  d(o_hat) = dy silu(z) w, do = r (d(o_hat) - o_hat mean_j(d(o_hat)_j
  o_hat_j)), and per program the partial sums sum_rows dy silu(z) o_hat of
  dw.

A program takes ``BLOCK_N`` tokens of one head (``bh``); o, z, y and their
gradients are addressed through (batch, head, token) strides with unit
channel stride (the gate and y as (B, H, N, d) views of token-major
(B, N, H d) tensors), so nothing is copied. Every sum and product is fp32
in registers; tensors keep their dtypes, w is fp32 and the partial sums
fp32 (programs, BLOCK_D).

:class:`RowLaunch` launches them and :class:`GatedRMSNorm` is the
autograd Function (:func:`~.gates.gated_rms_norm` dispatches to it).
"""

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..common.linear_launch import _strides, _unit_last_stride, _width
from ..common.tiles import _store, _tile
from ..common.triton_math import _silu_terms
from ..common.triton_runtime import fused_entry

# Sizes that vary between calls are not specialised on; the head width D
# is (a multiple of 16: rows load as 16-byte vectors).
SIZES = ['H', 'N']
# A program takes 64 tokens of one head at 8 warps: the kernels are bound
# by memory, and 8 warps keep the most resident (README.md).
BLOCK_N = 64
NUM_WARPS = 8


@triton.jit
def _rows(N, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """This program's head ``bh``, its tokens and which of them exist, and
    the channels."""
    tokens = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    return tl.program_id(1), tokens, tokens < N, tl.arange(0, BLOCK_D)


@triton.jit
def _normalised(
    o_ptr, sob, soh, son, w_ptr, bh, H, tokens, valid, cols, D, eps
):  # fmt: skip
    """(o_hat, r, w): the rows of o scaled to unit root mean square, the
    scales (BLOCK_N,), and w as an fp32 (BLOCK_D,) row, zero past D."""
    o = _tile(o_ptr, sob, soh, son, bh, H, tokens, valid, cols, D)
    r = 1.0 / tl.sqrt(tl.sum(o * o, 1) / D + eps)
    w = tl.load(w_ptr + cols, mask=cols < D, other=0.0).to(tl.float32)
    return o * r[:, None], r, w


@triton.jit(do_not_specialize=SIZES)
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


@triton.jit(do_not_specialize=SIZES)
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
    """An empty token-major (B, N, H width) tensor and its (B, H, N, width)
    view."""
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
        """(do (B, H, N, d) in o's dtype, d_gate (B, N, H d) in the gate's,
        dw (d,) fp32)."""
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
    the gate's dtype. Saves its three inputs."""

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
    """``merge_heads(rms_norm(o) * weight) * silu(gate)`` in fused Triton
    kernels, fp32 inside: o (B, H, N, d) (any strides with unit channel
    stride), gate (B, N, H d), weight (d,) -> (B, N, H d) in the gate's
    dtype."""
    return GatedRMSNorm.apply(o, gate, weight, eps)
