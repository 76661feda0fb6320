"""The triton backend of ``bidirectional_gla``: launches of our fused
kernels (:mod:`.triton_forward`, :mod:`.triton_backward`), both
directions in one pass, and their autograd Function. Launch choices and
their measurements: README.md."""

import functools
import inspect
import math
from collections.abc import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..common.heads import qkv_gradients
from ..common.recompute import leaf_grads, rerun_with_grad
from ..common.triton_runtime import (
    compute_capability,
    fused_entry,
    interpreting,
    num_stages,
    platform_reason,
    shared_memory_reason,
)
from .gates import within_chunks
from .naive import check_shapes

# Tokens per chunk and per sub-block (the diagonal blocks of exact decays).
CHUNK = 64
SUB_BLOCK = 16
# Wider heads would need more shared memory than one program may have.
MAX_HEAD_DIM = 64
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# Fixed launch options of each kernel, no autotuning (README.md).
LAUNCH = {
    'states': dict(num_warps=8),
    'whole_forward': dict(num_warps=4),
    'forward': dict(num_warps=8, num_stages=1),
    'whole_backward': dict(num_warps=4),
    'backward': dict(num_warps=8, num_stages=1),
    'gate_grad': dict(num_warps=4),
}
# Warps of the whole-chunk kernels off sm_90, where 4 spill more.
WHOLE_WARPS_ELSEWHERE = 8


def unsupported_reason(q, v):
    """Why the kernels cannot take q (B, H, T, d_k) and v, or None."""
    platform = platform_reason(q.device)
    if platform is not None:
        return platform
    d_k, d_v = q.shape[-1], v.shape[-1]
    if max(d_k, d_v) > MAX_HEAD_DIM:
        return f'head widths up to {MAX_HEAD_DIM} (got {d_k}, {d_v})'
    if q.dtype not in DTYPES or v.dtype not in DTYPES:
        return f'fp16/bf16/fp32 inputs (got {q.dtype}, {v.dtype})'
    return shared_memory_reason(q, v)


def _width(d, least=16):
    """Power-of-two tile width covering ``d`` channels."""
    return max(least, 1 << (d - 1).bit_length())


def tile_widths(K, V):
    """Channel tiles (BK, BV) of each launch for d_k = K, d_v = V."""
    return dict(
        states=dict(BK=min(32, _width(K)), BV=_width(V)),
        forward=dict(BK=_width(K), BV=min(64, _width(V))),
        backward=dict(BK=_width(K), BV=_width(V)),
        gate_grad=dict(BK=min(32, _width(K))),
    )


def _dtypes(dtype):
    """(DT, DOT) of the kernels for inputs of ``dtype``."""
    import triton.language as tl

    dt = {
        torch.float16: tl.float16,
        torch.bfloat16: tl.bfloat16,
        torch.float32: tl.float32,
    }[dtype]
    # The interpreter multiplies bf16 as integers: feed it fp32 holding
    # bf16-rounded values.
    interpreted = interpreting()
    return dt, tl.float32 if interpreted and dt == tl.bfloat16 else dt


def _like_tokens(x, d, dtype=None):
    """Empty (B, H, T, d) laid out (B, T, H, d), the projections' layout."""
    B, H, T, _ = x.shape
    out = x.new_empty(B, T, H, d, dtype=dtype or x.dtype)
    return out.transpose(1, 2)


def launch_options(kind, capability):
    """``LAUNCH[kind]`` on a GPU of ``capability`` ((major, minor), None
    under the interpreter)."""
    options = LAUNCH[kind]
    if kind.startswith('whole') and capability not in (None, (9, 0)):
        options = dict(options, num_warps=WHOLE_WARPS_ELSEWHERE)
    return options


def states_launch(programs):
    """The state scan's launch options for a grid of ``programs``."""
    return dict(LAUNCH['states'], num_stages=num_stages(programs))


def chunk_states(x, y, g0, g1, inclusive, dtypes):
    """:func:`~.triton_forward.chunk_states_kernel`: (2, B, H, NT, K, V)
    in y's dtype."""
    from .triton_forward import chunk_states_kernel

    B, H, T, K = x.shape
    V = y.shape[-1]
    NT = -(-T // CHUNK)
    out = y.new_empty(2, B, H, NT, K, V)
    tiles = tile_widths(K, V)['states']
    BK, BV = tiles['BK'], tiles['BV']
    grid = (-(-K // BK), -(-V // BV), 2 * B * H)
    chunk_states_kernel[grid](
        x, y, g0, g1, out,
        *x.stride(), *y.stride(), *g0.stride(), *g1.stride(),
        T, B, H, NT, K=K, V=V, BT=CHUNK, BK=BK, BV=BV, INCLUSIVE=inclusive,
        DT=dtypes[0], DOT=dtypes[1], **states_launch(math.prod(grid)),
    )  # fmt: skip
    return out


def forward(q, k, v, c_fwd, c_bwd, scale):
    """``scale * (o^f + flip(o^b))``, (B, H, T, d_v) in v's dtype, from
    the gates' sums within chunks ``c_fwd``, ``c_bwd`` (fp32 (B, H, T,
    d_k))."""
    from .triton_forward import bigla_fwd_kernel, chunk_fwd_kernel

    B, H, T, K = q.shape
    V = v.shape[-1]
    dtypes = _dtypes(v.dtype)
    states = chunk_states(k, v, c_fwd, c_bwd, False, dtypes)
    NT = states.shape[3]
    o = _like_tokens(v, V)
    tiles = tile_widths(K, V)['forward']
    grid = (-(-V // tiles['BV']), NT, B * H)
    whole = q.new_empty(grid[0], B * H, NT, dtype=torch.int32)
    tensors = (q, k, v, c_fwd, c_bwd, states, o, whole)
    strides = (q, k, v, c_fwd, c_bwd, o)
    sizes = dict(K=K, V=V, BT=CHUNK, **tiles)
    # The chunks taken whole, then the others by sub-blocks.
    chunk_fwd_kernel[grid](
        *tensors, *(n for t in strides for n in t.stride()),
        scale, T, B, H, NT, DT=dtypes[0], DOT=dtypes[1], **sizes,
        **launch_options('whole_forward', compute_capability(q.device)),
    )  # fmt: skip
    bigla_fwd_kernel[grid](
        *tensors, *(n for t in strides for n in t.stride()),
        scale, T, B, H, NT, BC=SUB_BLOCK, DT=dtypes[0], DOT=dtypes[1],
        **sizes, **LAUNCH['forward'],
    )  # fmt: skip
    return o


def backward(d_o, q, k, v, c_fwd, c_bwd, scale):
    """Gradients of :func:`forward`: dq, dk, dv in their inputs' dtype,
    dc_fwd, dc_bwd in fp32."""
    from .triton_backward import (
        PARTS,
        bigla_bwd_kernel,
        chunk_bwd_kernel,
        gate_grad_carry_kernel,
    )

    B, H, T, K = q.shape
    V = v.shape[-1]
    dtypes = _dtypes(v.dtype)
    d_o = d_o.to(v.dtype)
    states = chunk_states(k, v, c_fwd, c_bwd, False, dtypes)
    d_states = chunk_states(q, d_o, c_bwd, c_fwd, True, dtypes)
    if K == V:  # one buffer, the gradient of a qkv projection as it is
        dq, dk, dv = qkv_gradients(q)
    else:
        dq, dk, dv = _like_tokens(q, K), _like_tokens(k, K), _like_tokens(v, V)
    dg = q.new_empty(2, B, H, T, K, dtype=torch.float32)
    NT = states.shape[3]
    kinds = q.new_empty(B * H, NT, dtype=torch.int32)
    tensors = (q, k, v, c_fwd, c_bwd, d_o, states, d_states, dq, dk, dv, dg)
    strides = (q, k, v, c_fwd, c_bwd, d_o, dq, dk, dv)
    arguments = (
        *tensors, kinds, *(n for t in strides for n in t.stride()),
        scale, T, B, H, NT,
    )  # fmt: skip
    tiles = tile_widths(K, V)
    sizes = dict(K=K, V=V, BT=CHUNK, BC=SUB_BLOCK, **tiles['backward'])
    sizes.update(DT=dtypes[0], DOT=dtypes[1])
    # Whole chunks, then sub-blocks with factored diagonals, then exact.
    whole = launch_options('whole_backward', compute_capability(q.device))
    for part in PARTS:
        chunk_bwd_kernel[(NT, B * H)](*arguments, PART=part, **sizes, **whole)
    for exact in (False, True):
        bigla_bwd_kernel[(NT, B * H)](
            *arguments, EXACT=exact, **sizes, **LAUNCH['backward']
        )
    BK = tiles['gate_grad']['BK']
    gate_grad_carry_kernel[(-(-K // BK), B * H, 2)](
        dg, T, NT, K=K, BT=CHUNK, BK=BK, **LAUNCH['gate_grad']
    )
    return dq, dk, dv, dg[0], dg[1]


def given_gates(g_fwd, g_bwd, chunk=None):
    """The log-gates, or with ``chunk`` their sums within chunks."""
    if chunk is None:
        return g_fwd, g_bwd
    return within_chunks(g_fwd, g_bwd, chunk)


def chunked(gates: Callable[..., tuple[Tensor, Tensor]]) -> Callable:
    """``gates`` taking the keyword ``chunk``: itself where it does, else
    a wrapper summing its log-gates within chunks."""
    try:
        parameters = inspect.signature(gates).parameters.values()
    except (TypeError, ValueError):  # no signature to read
        parameters = ()
    if any(p.name == 'chunk' or p.kind is p.VAR_KEYWORD for p in parameters):
        return gates

    def summed(*gate_inputs, chunk):
        return given_gates(*gates(*gate_inputs), chunk=chunk)

    return summed


class BidirectionalGLATriton(torch.autograd.Function):
    """:func:`forward` and :func:`backward` with the gates
    ``gates(*gate_inputs, chunk=CHUNK)`` -> (c_fwd, c_bwd), each (B, H,
    T, d_k). Saves q, k, v and the gate inputs; the gates are recomputed
    in backward."""

    @staticmethod
    def forward(ctx, q, k, v, scale, gates, *gate_inputs):
        gates = functools.partial(gates, chunk=CHUNK)
        c_fwd, c_bwd = gates(*gate_inputs)
        check_shapes(q, k, v, c_fwd, c_bwd)
        ctx.save_for_backward(q, k, v, *gate_inputs)
        ctx.scale, ctx.gates = scale, gates
        return forward(q, k, v, c_fwd.float(), c_bwd.float(), scale)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_o):
        q, k, v, *gate_inputs = ctx.saved_tensors
        needs_grad = ctx.needs_input_grad[5:]
        leaves, gates = rerun_with_grad(ctx.gates, gate_inputs, needs_grad)
        dq, dk, dv, *d_gates = backward(
            d_o, q, k, v, *(g.detach().float() for g in gates), ctx.scale
        )
        d_inputs = leaf_grads(gates, d_gates, leaves)
        return dq, dk, dv, None, None, *d_inputs


@fused_entry
def bidirectional_triton_gated(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scale: float,
    gates: Callable[..., tuple[Tensor, Tensor]],
    *gate_inputs: Tensor,
) -> Tensor:
    """``(o^f + flip(o^b)) / 2`` by the fused kernels, the log-gates
    ``gates(*gate_inputs)`` recomputed in backward. q, k, v (B, H, T, d)
    in one common dtype, any strides; returns (B, H, T, d_v) in v's dtype,
    laid out (B, T, H, d_v)."""
    reason = unsupported_reason(q, v)
    if reason is not None:
        raise ValueError(f"backend='triton' supports {reason}.")
    dtype = functools.reduce(torch.promote_types, (q.dtype, k.dtype, v.dtype))
    q, k, w = (t.to(dtype) for t in (q, k, v))
    o = BidirectionalGLATriton.apply(
        q, k, w, scale / 2, chunked(gates), *gate_inputs
    )
    return o.to(v.dtype)


def bidirectional_triton(
    q: Tensor, k: Tensor, v: Tensor, g_fwd: Tensor, g_bwd: Tensor, scale: float
) -> Tensor:
    """:func:`bidirectional_triton_gated` with the log-gates given."""
    return bidirectional_triton_gated(
        q, k, v, scale, given_gates, g_fwd, g_bwd
    )
