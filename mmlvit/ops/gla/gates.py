"""What the GLA module computes around the scan, in PyTorch and by fused
kernels (:mod:`.gate_kernels`): the log-gates from the low-rank gate
projection, split into the two scan directions and the heads, and the
gated RMSNorm after the scan."""

import functools

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..common.dispatch import use_fused
from ..common.precision import fp32_scope
from ..common.triton_runtime import compute_capability, fused_entry

# Launch choices of the gate kernels (README.md): 64 tokens of one head a
# program; the log-gate kernel capped at 64 registers; the gradient on
# sm_90 at 4 warps with 'tf32x3' products.
BLOCK_N = 64
NUM_WARPS = 8
LOG_GATE_OPTIONS = dict(maxnreg=64)
GRAD_WARPS_SM90 = 4
GRAD_PRECISION_SM90 = 'tf32x3'
FEATURE_GRAD_PRECISION = 'tf32x3'


def grad_options(capability: tuple[int, int] | None) -> dict:
    """The log-gate gradient's warps and ``PRECISION`` on a GPU of
    ``capability`` (None under the interpreter)."""
    if capability in (None, (9, 0)):
        return dict(num_warps=GRAD_WARPS_SM90, PRECISION=GRAD_PRECISION_SM90)
    return dict(num_warps=NUM_WARPS, PRECISION='ieee')


def directions(t: Tensor, num_heads: int) -> tuple[Tensor, Tensor]:
    """(B, N, 2 H d) -> the forward and backward halves, (B, H, N, d) views."""
    B, N, width = t.shape
    d = width // (2 * num_heads)
    forward, backward = t.reshape(B, N, 2, num_heads, d).permute(2, 0, 3, 1, 4)
    return forward, backward


def within_chunks(
    g_fwd: Tensor, g_bwd: Tensor, chunk: int
) -> tuple[Tensor, Tensor]:
    """The log-gates' inclusive cumulative sums within chunks of ``chunk``
    tokens, forwards from each chunk's first token, backwards from its last:
    the fused scan's form of the gates. (B, H, T, d) each, in and out."""
    T = g_fwd.shape[2]
    pad = -T % chunk

    def cumulative(g, reverse):
        g = F.pad(g, (0, 0, 0, pad)).unflatten(2, (-1, chunk))
        c = g.flip(3).cumsum(3).flip(3) if reverse else g.cumsum(3)
        return c.flatten(2, 3)[:, :, :T]

    return cumulative(g_fwd, False), cumulative(g_bwd, True)


def log_gates(
    x: Tensor,
    down_weight: Tensor,
    up_weight: Tensor,
    up_bias: Tensor,
    num_heads: int,
    temperature: float,
    backend='auto',
    chunk: int | None = None,
) -> tuple[Tensor, Tensor]:
    """``logsigmoid((x @ down_weight^T) @ up_weight^T + up_bias) /
    temperature`` as the forward and backward log-gates, in at least fp32,
    autocast off; with ``chunk``, their sums within chunks
    (:func:`within_chunks`).

    Args:
        x (Tensor): (B, N, C) tokens, C = H d.
        down_weight (Tensor): (R, C).
        up_weight (Tensor): (2 C, R): forward scan's rows first.
        up_bias (Tensor): (2 C,).
        num_heads (int): H.
        temperature (float): T, dividing the log-sigmoids.
        backend (str): 'auto' (fused on CUDA, PyTorch elsewhere and while
            exporting), 'triton' or 'torch'.
        chunk (int, optional): Tokens per chunk of the sums; None: the
            log-gates themselves.

    Returns:
        tuple[Tensor, Tensor]: g_fwd, g_bwd (or c_fwd, c_bwd), each (B, H,
        N, d), views of one (B, N, 2 C) tensor.
    """
    # The checks see x and the weights by heads: d is the kernels' width.
    per_head = (
        x.unflatten(-1, (num_heads, -1)),
        up_weight.unflatten(0, (2 * num_heads, -1)).transpose(1, 2),
    )
    if use_fused(backend, *per_head, needs_shared_memory=False):
        cumulative = chunk == BLOCK_N
        gates = fused_log_gates(
            x, down_weight, up_weight, up_bias, num_heads, temperature,
            cumulative,
        )  # fmt: skip
        if chunk is None or cumulative:
            return gates
    else:
        with fp32_scope(x, down_weight, up_weight, up_bias) as upcast:
            x, down_weight, up_weight, up_bias = upcast
            logits = F.linear(F.linear(x, down_weight), up_weight, up_bias)
            # In place: logsigmoid's backward needs its input only.
            logits = F.logsigmoid(logits).div_(temperature)
        gates = directions(logits, num_heads)
    return gates if chunk is None else within_chunks(*gates, chunk)


@fused_entry
def fused_log_gates(
    x, down_weight, up_weight, up_bias, num_heads, temperature, cumulative
):  # fmt: skip
    """:func:`log_gates` by the fused kernels (``cumulative``: sums within
    chunks of :data:`BLOCK_N`)."""
    features = GateFeatures.apply(x, down_weight)
    return LogGates.apply(
        features, up_weight, up_bias, num_heads, temperature, cumulative
    )


class GateFeatures(torch.autograd.Function):
    """x (B, N, C) in any dtype, down_weight (R, C) -> x down_weight^T
    (B, N, R) in fp32; saves its inputs."""

    @staticmethod
    def forward(ctx, x, down_weight):
        from . import gate_kernels as kernels

        x, down_weight = x.contiguous(), down_weight.contiguous()
        R, C = down_weight.shape
        M = x.numel() // C
        features = x.new_empty(M, R, dtype=torch.float32)
        kernels.gate_features_kernel[(_tiles(M),)](
            x, down_weight, features, M, C, R, **feature_constants(R)
        )
        ctx.save_for_backward(x, down_weight)
        return features.view(*x.shape[:-1], R)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_features):
        from . import gate_kernels as kernels

        x, down_weight = ctx.saved_tensors
        R, C = down_weight.shape
        M = x.numel() // C
        d_features = d_features.contiguous()
        dx = torch.empty_like(x)
        d_weight = x.new_empty(_tiles(M), R, C, dtype=torch.float32)
        constants = feature_constants(R, grad=True)
        grid = (_tiles(M), -(-C // constants['BLOCK_C']))
        kernels.gate_features_grad_kernel[grid](
            x, down_weight, d_features, dx, d_weight, M, C, R, **constants
        )
        return dx, d_weight.sum(0).to(down_weight.dtype)


def feature_constants(rank: int, grad: bool = False) -> dict:
    """The feature kernels' compile-time options for ``rank`` features
    (``grad``: of the gradient)."""
    from ..common.linear_launch import _width

    constants = dict(
        BLOCK_M=BLOCK_N,
        BLOCK_C=32,
        BLOCK_R=_width(rank),
        num_warps=4,
    )
    if grad:
        constants['PRECISION'] = FEATURE_GRAD_PRECISION
    return constants


def launch_constants(width: int, rank: int, cumulative: bool) -> dict:
    """The log-gate kernels' compile-time options for heads of ``width``
    and features of ``rank``."""
    from ..common.linear_launch import _width

    return dict(
        BLOCK_N=BLOCK_N,
        BLOCK_D=_width(width),
        BLOCK_R=_width(rank),
        CUMULATIVE=cumulative,
        num_warps=NUM_WARPS,
    )


class LogGates(torch.autograd.Function):
    """features (B, N, R), up_weight (2 H d, R), up_bias (2 H d,) -> g_fwd,
    g_bwd (B, H, N, d), views of one tensor, or with ``cumulative`` their
    sums within chunks of :data:`BLOCK_N`; saves its inputs."""

    @staticmethod
    def forward(
        ctx, features, up_weight, up_bias, num_heads, temperature, cumulative
    ):
        from . import gate_kernels as kernels

        features, up_weight, up_bias = (
            t.contiguous() for t in (features, up_weight, up_bias)
        )
        B, N, R = features.shape
        width = up_weight.shape[0] // (2 * num_heads)
        gates = features.new_empty(B, N, up_weight.shape[0])
        kernels.log_gate_kernel[(_tiles(N), B * 2 * num_heads)](
            features, up_weight, up_bias, gates, num_heads, N, width, R,
            1.0 / temperature, **launch_constants(width, R, cumulative),
            **LOG_GATE_OPTIONS,
        )  # fmt: skip
        ctx.save_for_backward(features, up_weight, up_bias)
        ctx.num_heads, ctx.temperature = num_heads, temperature
        ctx.cumulative = cumulative
        return directions(gates, num_heads)

    @staticmethod
    @once_differentiable
    def backward(ctx, dg_fwd, dg_bwd):
        from . import gate_kernels as kernels

        features, up_weight, up_bias = ctx.saved_tensors
        B, N, R = features.shape
        H, channels = ctx.num_heads, up_weight.shape[0]
        width = channels // (2 * H)
        partial_sums = functools.partial(
            features.new_empty, dtype=torch.float32
        )
        d_features = partial_sums(2 * H, B, N, R)
        d_weight = partial_sums(_tiles(N), B, channels, R)
        d_bias = partial_sums(_tiles(N), B, channels)
        constants = launch_constants(width, R, ctx.cumulative)
        constants.update(grad_options(compute_capability(features.device)))
        for direction, grad in enumerate((dg_fwd, dg_bwd)):
            grad = grad if grad.stride(-1) == 1 else grad.contiguous()
            kernels.log_gate_grad_kernel[(_tiles(N), B * H)](
                features, up_weight, up_bias, grad, d_features, d_weight,
                d_bias, *grad.stride()[:3], B, H, N, width, R,
                1.0 / ctx.temperature, DIRECTION=direction, **constants,
            )  # fmt: skip
        return (
            d_features.sum(0).to(features.dtype),
            d_weight.sum((0, 1)).to(up_weight.dtype),
            d_bias.sum((0, 1)).to(up_bias.dtype),
            None,
            None,
            None,
        )


def _tiles(tokens: int) -> int:
    """Token tiles of a launch."""
    return -(-tokens // BLOCK_N)


def gated_rms_norm(
    o: Tensor, gate: Tensor, weight: Tensor, eps: float, backend='auto'
) -> Tensor:
    """RMSNorm over each head's d channels (one weight for all heads), the
    heads merged, times ``silu(gate)``; in at least fp32, autocast off.

    Args:
        o (Tensor): (B, H, N, d).
        gate (Tensor): (B, N, H d).
        weight (Tensor): (d,).
        eps (float): Added to the mean square.
        backend (str): 'auto', 'triton' or 'torch', as for :func:`log_gates`.

    Returns:
        Tensor: (B, N, H d) in the gate's dtype.
    """
    # The kernels hold a few (64, d) fp32 tiles: no shared-memory limit.
    if use_fused(backend, o, gate[..., :1], needs_shared_memory=False):
        from .gate_kernels import fused_gated_rms_norm

        return fused_gated_rms_norm(o, gate, weight, eps)
    with fp32_scope(o, weight, gate) as (o32, weight32, gate32):
        normed = F.rms_norm(o32, (o.shape[-1],), weight32, eps)
        y = normed.transpose(1, 2).flatten(2) * F.silu(gate32)
    return y.to(gate.dtype)
