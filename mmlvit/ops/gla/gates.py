"""GLA's log-gates from the low-rank gate projection, ``logsigmoid(f W^T +
b) / T`` split into the two scan directions and the heads, with fused
Triton kernels (:mod:`.gate_kernels`: one pass forward, one backward per
direction, the logits only in registers) and the PyTorch reference."""

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from ..fused_linear import use_fused

# 64 tokens of one head a program, 8 warps, as the gated norm's kernels.
BLOCK_N = 64
NUM_WARPS = 8


def directions(t: Tensor, num_heads: int) -> tuple[Tensor, Tensor]:
    """(B, N, 2 H d) -> the forward and backward halves as (B, H, N, d)
    views."""
    B, N, _ = t.shape
    forward, backward = t.reshape(B, N, 2, num_heads, -1).permute(
        2, 0, 3, 1, 4
    )
    return forward, backward


def log_gates(
    features: Tensor,
    up_weight: Tensor,
    up_bias: Tensor,
    num_heads: int,
    temperature: float,
    backend='auto',
) -> tuple[Tensor, Tensor]:
    """``logsigmoid(features @ up_weight^T + up_bias) / temperature`` as the
    forward and backward log-gates.

    Args:
        features (Tensor): (B, N, R), the low-rank gate projection of the
            tokens.
        up_weight (Tensor): (2 C, R), C = H d: the first C rows gate the
            forward scan, the last C the backward one.
        up_bias (Tensor): (2 C,).
        num_heads (int): H.
        temperature (float): T, dividing the log-sigmoids.
        backend (str): ``'auto'`` (fused on CUDA, PyTorch elsewhere and
            while exporting), ``'triton'`` or ``'torch'``; see
            :func:`mmlvit.ops.fused_linear.use_fused`. The fused kernels
            never store the (B, N, 2 C) logits.

    Returns:
        tuple[Tensor, Tensor]: g_fwd, g_bwd, each (B, H, N, d) in the
        features' dtype (views of one (B, N, 2 C) tensor), <= 0.
    """
    # The checks see the weights as (2 H, R, d): d is the kernels' width.
    per_head = up_weight.unflatten(0, (2 * num_heads, -1)).transpose(1, 2)
    if use_fused(backend, features, per_head, needs_shared_memory=False):
        return LogGates.apply(
            features, up_weight, up_bias, num_heads, temperature
        )
    logits = F.linear(features, up_weight, up_bias)
    # In place: logsigmoid's backward needs its input, not its output.
    return directions(F.logsigmoid(logits).div_(temperature), num_heads)


def launch_constants(width: int, rank: int) -> dict:
    """The kernels' compile-time options for heads of ``width`` channels
    and features of ``rank``."""
    from ..fused_linear.function import _width

    return dict(
        R=rank, BLOCK_N=BLOCK_N, BLOCK_D=_width(width), num_warps=NUM_WARPS
    )


class LogGates(torch.autograd.Function):
    """features (B, N, R), up_weight (2 H d, R), up_bias (2 H d,) -> g_fwd,
    g_bwd (B, H, N, d), views of one tensor; saves its three inputs. The
    gradients come from per-program partial sums (see :mod:`.gate_kernels`),
    added up here."""

    @staticmethod
    def forward(ctx, features, up_weight, up_bias, num_heads, temperature):
        from . import gate_kernels as kernels

        features, up_weight, up_bias = (
            t.contiguous() for t in (features, up_weight, up_bias)
        )
        B, N, R = features.shape
        width = up_weight.shape[0] // (2 * num_heads)
        gates = features.new_empty(B, N, up_weight.shape[0])
        kernels.log_gate_kernel[(_tiles(N), B * 2 * num_heads)](
            features, up_weight, up_bias, gates, num_heads, N, width,
            1.0 / temperature, **launch_constants(width, R),
        )  # fmt: skip
        ctx.save_for_backward(features, up_weight, up_bias)
        ctx.num_heads, ctx.temperature = num_heads, temperature
        return directions(gates, num_heads)

    @staticmethod
    def backward(ctx, dg_fwd, dg_bwd):
        from . import gate_kernels as kernels

        features, up_weight, up_bias = ctx.saved_tensors
        B, N, R = features.shape
        H, channels = ctx.num_heads, up_weight.shape[0]
        width = channels // (2 * H)
        partial = functools.partial(features.new_empty, dtype=torch.float32)
        d_features = partial(2 * H, B, N, R)
        d_weight = partial(_tiles(N), B, channels, R)
        d_bias = partial(_tiles(N), B, channels)
        for direction, grad in enumerate((dg_fwd, dg_bwd)):
            grad = grad if grad.stride(-1) == 1 else grad.contiguous()
            kernels.log_gate_grad_kernel[(_tiles(N), B * H)](
                features, up_weight, up_bias, grad, d_features, d_weight,
                d_bias, *grad.stride()[:3], B, H, N, width, direction,
                1.0 / ctx.temperature, **launch_constants(width, R),
            )  # fmt: skip
        return (
            d_features.sum(0).to(features.dtype),
            d_weight.sum((0, 1)).to(up_weight.dtype),
            d_bias.sum((0, 1)).to(up_bias.dtype),
            None,
            None,
        )


def _tiles(tokens: int) -> int:
    """Token tiles of a launch."""
    return -(-tokens // BLOCK_N)
