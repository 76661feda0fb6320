"""GLA's log-gates from their logits, ``logsigmoid(l) / T`` split into the
two scan directions and the heads, with fused Triton kernels
(:mod:`.gate_kernels`: one pass forward, one backward per direction)
and the PyTorch reference."""

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
    logits: Tensor, num_heads: int, temperature: float, backend='auto'
) -> tuple[Tensor, Tensor]:
    """``logsigmoid(logits) / temperature`` as the forward and backward
    log-gates.

    Args:
        logits (Tensor): (B, N, 2 C), C = H d: the first C channels gate the
            forward scan, the last C the backward one.
        num_heads (int): H.
        temperature (float): T, dividing the log-sigmoids.
        backend (str): ``'auto'`` (fused on CUDA, PyTorch elsewhere and
            while exporting), ``'triton'`` or ``'torch'``; see
            :func:`mmlvit.ops.fused_linear.use_fused`.

    Returns:
        tuple[Tensor, Tensor]: g_fwd, g_bwd, each (B, H, N, d) in the
        logits' dtype (views of one (B, N, 2 C) tensor), <= 0.
    """
    if use_fused(
        backend, directions(logits, num_heads)[0], needs_shared_memory=False
    ):
        return LogGates.apply(logits, num_heads, temperature)
    # In place: logsigmoid's backward needs its input, not its output.
    return directions(F.logsigmoid(logits).div_(temperature), num_heads)


def launch_constants(width: int) -> dict:
    """The kernels' compile-time options for heads of ``width`` channels."""
    from ..fused_linear.function import _width

    return dict(BLOCK_N=BLOCK_N, BLOCK_D=_width(width), num_warps=NUM_WARPS)


def _launch(kernel, *tensors, temperature):
    """``kernel`` over (B, H, N, d) tensors of one direction."""
    import triton

    B, H, N, D = tensors[0].shape
    grid = (triton.cdiv(N, BLOCK_N), B * H)
    strides = (n for t in tensors for n in t.stride()[:3])
    kernel[grid](
        *tensors, *strides, H, N, D, 1.0 / temperature,
        **launch_constants(D),
    )  # fmt: skip


class LogGates(torch.autograd.Function):
    """logits (B, N, 2 H d) -> g_fwd, g_bwd (B, H, N, d), views of one
    tensor; saves the logits. The gradients of the two directions are
    written into the logits' gradient as they come, not stacked."""

    @staticmethod
    def forward(ctx, logits, num_heads, temperature):
        from . import gate_kernels as kernels

        logits = logits.contiguous()
        gates = torch.empty_like(logits)
        pairs = zip(
            directions(logits, num_heads), directions(gates, num_heads)
        )
        for source, target in pairs:
            _launch(
                kernels.log_gate_kernel,
                source,
                target,
                temperature=temperature,
            )
        ctx.save_for_backward(logits)
        ctx.num_heads, ctx.temperature = num_heads, temperature
        return directions(gates, ctx.num_heads)

    @staticmethod
    def backward(ctx, dg_fwd, dg_bwd):
        from . import gate_kernels as kernels

        (logits,) = ctx.saved_tensors
        d_logits = torch.empty_like(logits)
        triples = zip(
            directions(logits, ctx.num_heads),
            (dg_fwd, dg_bwd),
            directions(d_logits, ctx.num_heads),
        )
        for source, grad, target in triples:
            grad = grad if grad.stride(-1) == 1 else grad.contiguous()
            _launch(
                kernels.log_gate_grad_kernel,
                source,
                grad.to(logits.dtype),
                target,
                temperature=ctx.temperature,
            )
        return d_logits, None, None
