"""Launch code of :mod:`.norm_kernels` and the gated RMSNorm as an autograd
Function."""

import torch
import triton
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..common.linear_function import _strides, _unit_last_stride, _width
from ..common.triton_runtime import fused_entry
from . import norm_kernels as kernels

# A program takes 64 tokens of one head. The kernels are bound by memory:
# at 8 warps the forward takes 42 registers a thread and the gradient 121,
# 40 and 16 resident warps (at 4: 60 and 180, 32 and 8; sm_90, bf16,
# d = 64, no spill; tools/analysis/kernel_resources.py).
BLOCK_N = 64
NUM_WARPS = 8


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
        kernels.gated_norm_kernel[self.grid](
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
        kernels.gated_norm_grad_kernel[self.grid](
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
