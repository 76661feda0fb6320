"""The public bidirectional GLA op: argument checks and the choice between
the PyTorch, the fused Triton and the fla backend, and the fla backend:
bidirectional GLA by fla's Triton ``chunk_gla`` (fla-core,
github.com/fla-org/flash-linear-attention).

The triton backend: bidirectional GLA by our fused Triton kernels
(:mod:`.triton_kernels`, :mod:`.triton_chunk_kernels`,
:mod:`.triton_backward_kernels`), both directions in one pass over the
tokens, and its autograd Function.

The gates enter as their cumulative sums within the chunks of 64 tokens
(:func:`~.gates.within_chunks`), so that a span's gate sum is a difference
of two entries and no kernel scans gates. Forward: the chunk states of
both directions (one launch), then the outputs of the chunks taken whole
and of the others (one launch each). Backward rescans the states and
their gradients, then dq, dk, dv and the gate gradients of both kinds of
chunk, then one launch carries the gate gradients across chunks. Only q,
k, v and the gates' inputs are saved (the gates are recomputed). Fixed
launch configurations, no autotuning; the launch sequence, grids, state
storage and measurements are in README.md.
"""

import functools
import inspect
import math
from collections.abc import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..common.heads import qkv_gradients
from ..common.recompute import leaf_grads, recomputed, rerun_with_grad
from ..common.tracing import exporting
from ..common.triton_runtime import (
    compute_capability,
    fused_entry,
    interpreting,
    num_stages,
    platform_reason,
    shared_memory_reason,
    triton_importable,
)
from .chunk import bidirectional_gla_chunked
from .gates import within_chunks
from .naive import bidirectional_gla_traceable, check_shapes, default_scale

# Tokens per chunk and per sub-block (the diagonal blocks of exact decays).
CHUNK = 64


SUB_BLOCK = 16


# Largest head width: the output and gradient kernels hold all d_k (and,
# backward, all d_v) channels of a sub-block; 128-wide tiles would need
# more shared memory than one program may have.
MAX_HEAD_DIM = 64


DTYPES = (torch.float16, torch.bfloat16, torch.float32)


# Fixed launch configuration of each kernel (Triton's launch options): the
# whole-chunk kernels at 4 warps (straight-line code, two programs a
# multiprocessor), the sub-block kernels at 8 (4 would spill) with loops
# that copy nothing ahead, the state scan at 8 (README.md).
LAUNCH = {
    'states': dict(num_warps=8),
    'whole_forward': dict(num_warps=4),
    'forward': dict(num_warps=8, num_stages=1),
    'whole_backward': dict(num_warps=4),
    'backward': dict(num_warps=8, num_stages=1),
    'gate_grad': dict(num_warps=4),
}


# Warps of the whole-chunk kernels on GPUs other than sm_90, where 4
# warps spill more.
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
    """Channel tiles (BK, BV) of each launch for heads of d_k = K and
    d_v = V: the state scans take blocks of 32 key channels by every
    value channel, the outputs up to 64 value channels, the gradients
    every channel."""
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
    # bf16-rounded values (see triton_kernels).
    interpreted = interpreting()
    return dt, tl.float32 if interpreted and dt == tl.bfloat16 else dt


def _like_tokens(x, d, dtype=None):
    """Empty (B, H, T, d) laid out (B, T, H, d), the projections' layout."""
    B, H, T, _ = x.shape
    out = x.new_empty(B, T, H, d, dtype=dtype or x.dtype)
    return out.transpose(1, 2)


def launch_options(kind, capability):
    """``LAUNCH[kind]`` on a GPU of compute ``capability`` ((major, minor),
    None under Triton's interpreter): the whole-chunk kernels take
    :data:`WHOLE_WARPS_ELSEWHERE` warps on GPUs other than sm_90."""
    options = LAUNCH[kind]
    if kind.startswith('whole') and capability not in (None, (9, 0)):
        options = dict(options, num_warps=WHOLE_WARPS_ELSEWHERE)
    return options


def states_launch(programs):
    """The state scan's launch options for a grid of ``programs``: its
    loop over the chunks copies nothing ahead where there are many
    (:func:`~..common.triton_runtime.num_stages`), and copies ahead where
    a multiprocessor has one program or two."""
    return dict(LAUNCH['states'], num_stages=num_stages(programs))


def chunk_states(x, y, g0, g1, inclusive, dtypes):
    """:func:`~.triton_kernels.chunk_states_kernel`: (2, B, H, NT, K, V)
    in y's dtype (the kernels' ``DT``)."""
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
    the cumulative gates within chunks ``c_fwd``, ``c_bwd`` (fp32 (B, H,
    T, d_k), :func:`~.gates.within_chunks`)."""
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
    dc_fwd, dc_bwd (of the cumulative gates) in fp32."""
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
    # The chunks taken whole, then by sub-blocks with factored diagonals,
    # then with exact ones.
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
    """The log-gates as they are, or with ``chunk`` their cumulative sums
    within chunks (:func:`~.gates.within_chunks`): the ``gates`` of
    :class:`BidirectionalGLATriton` for gates given as tensors."""
    if chunk is None:
        return g_fwd, g_bwd
    return within_chunks(g_fwd, g_bwd, chunk)


def chunked(gates: Callable[..., tuple[Tensor, Tensor]]) -> Callable:
    """``gates`` as :class:`BidirectionalGLATriton` calls it, with the
    keyword ``chunk``: itself where it takes that keyword (as
    :func:`~.gates.log_gates` does, summing in its kernel), else a
    function that sums its log-gates within chunks
    (:func:`given_gates`)."""
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
    """:func:`forward` and :func:`backward` as an autograd Function whose
    gates are ``gates(*gate_inputs, chunk=CHUNK)`` -> (c_fwd, c_bwd), the
    log-gates' cumulative sums within chunks of CHUNK tokens
    (:func:`~.gates.within_chunks`), each (B, H, T, d_k); its gradients
    are theirs. It saves q, k, v and the gate inputs and recomputes the
    gates in backward: the two fp32 (B, H, T, d_k) gate tensors are not
    kept when ``gates`` derives them from smaller inputs (the GLA module's
    tokens and low-rank gate weights); with :func:`given_gates` the inputs
    are the gates themselves."""

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
    """``(o^f + flip(o^b)) / 2`` by the fused kernels, with log-gates
    ``gates(*gate_inputs)`` recomputed in backward, not kept (see
    :class:`BidirectionalGLATriton`). q, k, v keep their (autocast) dtype,
    one common one if they differ; the gates go in as fp32. No copies of
    contiguous or strided (B, H, T, d) views.

    Args:
        q, k (Tensor): (B, H, T, d_k).
        v (Tensor): (B, H, T, d_v).
        scale (float): Query scale.
        gates (Callable): Deterministic function of ``gate_inputs`` giving
            the log-gates <= 0 (g_fwd, g_bwd), each (B, H, T, d_k) in token
            order. Where it takes the keyword ``chunk``, it is called with
            ``chunk=n`` and gives their cumulative sums within chunks of n
            tokens instead (:func:`~.gates.log_gates`,
            :func:`~.gates.within_chunks`); otherwise its gates are summed
            so (:func:`chunked`).
        *gate_inputs (Tensor): Its tensors (those that need gradients get
            them).

    Returns:
        Tensor: (B, H, T, d_v) in the dtype of ``v`` (laid out (B, T, H,
        d_v) in memory).
    """
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
    """:func:`bidirectional_triton_gated` with the log-gates g_fwd, g_bwd
    (B, H, T, d_k) given (the triton backend of ``bidirectional_gla``, which
    checks the shapes and resolves ``scale``)."""
    return bidirectional_triton_gated(
        q, k, v, scale, given_gates, g_fwd, g_bwd
    )


BACKENDS = ('auto', 'torch', 'triton', 'fla')


CUDA_BACKENDS = ('triton', 'fla')


def check_backend(backend: str) -> None:
    """Raise a ValueError unless ``backend`` is one of :data:`BACKENDS`."""
    if backend not in BACKENDS:
        raise ValueError(
            f'Unknown GLA backend {backend!r}; expected one of {BACKENDS}.'
        )


def resolve_backend(
    backend: str, device: torch.device, supported: bool = True
) -> str:
    """'torch', 'triton' or 'fla' for ``backend`` on ``device`` (a
    torch.device): 'auto' is 'triton' on CUDA when Triton imports and the
    inputs are ``supported`` by its kernels, else 'torch'.

    Raises a ValueError for an unknown name and a RuntimeError for 'triton'
    (unless Triton's interpreter runs) or 'fla' off CUDA."""
    check_backend(backend)
    if backend == 'auto':
        use_triton = device.type == 'cuda' and supported
        return 'triton' if use_triton and triton_importable() else 'torch'
    # Triton's interpreter runs our kernels (not fla's) on CPU tensors.
    interpreted = backend == 'triton' and interpreting()
    if backend in CUDA_BACKENDS and device.type != 'cuda' and not interpreted:
        raise RuntimeError(
            f'backend={backend!r} runs Triton kernels, which need CUDA '
            f"tensors; got tensors on {device}. Use backend='torch' (or "
            "'auto', which picks the PyTorch path off CUDA)."
        )
    return backend


def _backend(backend: str, q: Tensor, v: Tensor) -> str:
    """:func:`resolve_backend` for q, v; 'traceable' for an empty batch
    (no kernel to launch, no chunk to scan: the plain-op form gives the
    empty result)."""
    if q.numel() == 0:
        check_backend(backend)
        return 'traceable'
    supported = unsupported_reason(q, v) is None
    return resolve_backend(backend, q.device, supported)


def bidirectional_gla(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g_fwd: Tensor,
    g_bwd: Tensor,
    scale: float | None = None,
    backend: str = 'auto',
    chunk_size: int = 64,
) -> Tensor:
    """Bidirectional GLA: ``(o^f + flip(o^b)) / 2``.

    ``o^f`` is the causal scan with gates ``g_fwd``; ``o^b`` the causal scan
    of the reversed sequence with the reversed ``g_bwd``, so token t sees
    keys s >= t decayed by ``prod_{r=t}^{s-1} alpha^b_r``.

    Args:
        q (Tensor): Queries (B, H, T, d_k).
        k (Tensor): Keys (B, H, T, d_k).
        v (Tensor): Values (B, H, T, d_v).
        g_fwd (Tensor): Forward log-gates <= 0, (B, H, T, d_k), in token
            order.
        g_bwd (Tensor): Backward log-gates <= 0, (B, H, T, d_k), in token
            order.
        scale (float, optional): Query scale. Defaults to d_k^-1/2.
        backend (str): ``'torch'`` (:func:`~.chunk.gla_chunked`'s scan, any
            device), ``'triton'`` (our fused kernels,
            :func:`~.triton_backend.bidirectional_triton`, CUDA only, fp16 /
            bf16 / fp32, head widths up to 64), ``'fla'`` (fla's Triton
            ``chunk_gla``, CUDA only) or ``'auto'`` (triton on CUDA where it
            applies, else torch). Defaults to 'auto'. While a model is
            traced for export (see
            :func:`mmlvit.ops.common.tracing.exporting`), every backend
            gives way
            to :func:`~.naive.bidirectional_gla_traceable`, the same
            function in plain PyTorch ops.
        chunk_size (int): Chunk of the torch path. Defaults to 64.

    Returns:
        Tensor: (B, H, T, d_v) in the dtype of ``v``.
    """
    check_shapes(q, k, v, g_fwd, g_bwd)
    scale = default_scale(q, scale)
    chosen = 'traceable' if exporting() else _backend(backend, q, v)
    if chosen == 'traceable':
        return bidirectional_gla_traceable(q, k, v, g_fwd, g_bwd, scale)
    if chosen == 'triton':
        return bidirectional_triton(q, k, v, g_fwd, g_bwd, scale)
    if chosen == 'fla':
        return bidirectional_fla(q, k, v, g_fwd, g_bwd, scale)
    return bidirectional_gla_chunked(q, k, v, g_fwd, g_bwd, scale, chunk_size)


def bidirectional_gla_gated(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    gates: Callable[..., tuple[Tensor, Tensor]],
    *gate_inputs: Tensor,
    scale: float | None = None,
    backend: str = 'auto',
    chunk_size: int = 64,
) -> Tensor:
    """:func:`bidirectional_gla` with log-gates ``gates(*gate_inputs)`` ->
    (g_fwd, g_bwd) that are recomputed in backward instead of kept: two
    fp32 (B, H, T, d_k) tensors per call that a model computing its gates
    from its tokens and a few weights need not hold for backward. The fused
    kernels' autograd Function recomputes them itself; the other backends
    run ``gates`` under activation checkpointing
    (:func:`~mmlvit.ops.common.recompute.recomputed`), which keeps only
    its inputs but hands the gates to a scan that saves them.

    Args:
        q, k (Tensor): (B, H, T, d_k).
        v (Tensor): (B, H, T, d_v).
        gates (Callable): A deterministic function of ``gate_inputs`` giving
            the forward and backward log-gates <= 0, each (B, H, T, d_k) in
            token order. The triton backend takes the log-gates'
            cumulative sums within chunks of 64 tokens
            (:func:`~.gates.within_chunks`): from ``gates(*gate_inputs,
            chunk=64)`` where it takes that keyword, as
            :func:`~.gates.log_gates` does, else by summing its gates.
        *gate_inputs (Tensor): Its tensors.
        scale, backend, chunk_size: As for :func:`bidirectional_gla`.

    Returns:
        Tensor: (B, H, T, d_v) in the dtype of ``v``.
    """
    if exporting():
        return bidirectional_gla(q, k, v, *gates(*gate_inputs), scale=scale)
    if _backend(backend, q, v) == 'triton':
        scale = default_scale(q, scale)
        return bidirectional_triton_gated(q, k, v, scale, gates, *gate_inputs)
    g_fwd, g_bwd = recomputed(gates, *gate_inputs)
    return bidirectional_gla(
        q, k, v, g_fwd, g_bwd, scale, backend=backend, chunk_size=chunk_size
    )


@functools.cache
def fla_chunk_gla():
    """fla's chunked GLA kernel (``fla.ops.gla.chunk_gla``); an ImportError
    naming the fla-core package if it does not import."""
    try:
        from fla.ops.gla import chunk_gla
    except ImportError as e:
        raise ImportError(
            "backend='fla' needs the fla-core package (fla.ops.gla."
            "chunk_gla); install it or use backend='torch'."
        ) from e
    return chunk_gla


@functools.cache
def fla_importable():
    """Whether :func:`fla_chunk_gla` imports."""
    try:
        fla_chunk_gla()
    except ImportError:
        return False
    return True


@fused_entry
def bidirectional_fla(
    q: Tensor, k: Tensor, v: Tensor, g_fwd: Tensor, g_bwd: Tensor, scale: float
) -> Tensor:
    """``(o^f + flip(o^b)) / 2`` in one ``chunk_gla`` call: the forward
    sequences and the reversed ones stacked along the batch, in fla's
    (B, T, H, d) layout. q, k, v keep their (autocast) dtype; the log-gates
    go in as fp32; no initial state is passed (fla's zero state, kept in
    fp32 by the kernel). Shapes are not checked here. A fused entry point
    (:func:`~mmlvit.ops.common.triton_runtime.fused_entry`): ``torch.compile``
    calls it eagerly.

    Args:
        q, k (Tensor): (B, H, T, d_k).
        v (Tensor): (B, H, T, d_v).
        g_fwd, g_bwd (Tensor): Log-gates (B, H, T, d_k), token order.
        scale (float): Query scale.

    Returns:
        Tensor: (B, H, T, d_v) in the dtype of ``v``.
    """
    chunk_gla = fla_chunk_gla()

    def both_directions(forward, backward):
        stacked = torch.cat([forward, backward.flip(2)], dim=0)
        return stacked.transpose(1, 2)

    o, _ = chunk_gla(
        both_directions(q, q),
        both_directions(k, k),
        both_directions(v, v),
        both_directions(g_fwd, g_bwd).float(),
        scale=scale,
    )
    o_fwd, o_bwd = o.transpose(1, 2).float().chunk(2, dim=0)
    return ((o_fwd + o_bwd.flip(2)) / 2).to(v.dtype)
