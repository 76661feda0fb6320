"""The public bidirectional GLA op: argument checks and the choice between
the PyTorch, the fused Triton and the fla backend, and the fla backend:
bidirectional GLA by fla's Triton ``chunk_gla`` (fla-core,
github.com/fla-org/flash-linear-attention)."""

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from ..common.recompute import recomputed
from ..common.tracing import exporting
from ..common.triton_runtime import (
    fused_entry,
    interpreting,
    triton_importable,
)
from .chunk import bidirectional_gla_chunked
from .naive import bidirectional_gla_traceable, check_shapes, default_scale
from .triton_backend import (
    bidirectional_triton,
    bidirectional_triton_gated,
    unsupported_reason,
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
