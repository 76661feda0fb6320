"""Gated linear attention (GLA, Yang et al. 2024, arXiv:2312.06635),
causal and bidirectional (ViG, arXiv:2405.18425), as fla's ``ops/gla``;
the math, the modules and the launch choices are in README.md. Here: the
public op, its backend choice and the fla backend.

All ops take the layout (B, H, T, d), run with autocast off, keep states,
gates and decays in at least fp32 (fp64 for fp64 inputs) and return the
dtype of ``v`` (of ``q`` for the map). ``scale`` defaults to d_k^-1/2.
"""

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
from .chunk import bidirectional_gla_chunked, gla_chunked
from .gates import gated_rms_norm, log_gates
from .naive import (
    bidirectional_gla_map,
    bidirectional_gla_traceable,
    check_shapes,
    default_scale,
    gla_recurrent,
)
from .triton_function import (
    bidirectional_triton,
    bidirectional_triton_gated,
    unsupported_reason,
)

__all__ = [
    'BACKENDS',
    'bidirectional_gla',
    'bidirectional_gla_gated',
    'bidirectional_gla_map',
    'check_backend',
    'gated_rms_norm',
    'gla_chunked',
    'gla_recurrent',
    'log_gates',
    'resolve_backend',
]


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
    """'torch', 'triton' or 'fla' for ``backend`` on ``device``: 'auto' is
    'triton' on CUDA when Triton imports and the kernels support the
    inputs, else 'torch'. RuntimeError for 'triton' (unless interpreted)
    or 'fla' off CUDA."""
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
    """:func:`resolve_backend` for q, v; 'traceable' for an empty batch."""
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
    """Bidirectional GLA: ``(o^f + flip(o^b)) / 2``, ``o^f`` the causal
    scan with gates ``g_fwd``, ``o^b`` that of the reversed sequence with
    the reversed ``g_bwd``.

    Args:
        q, k (Tensor): (B, H, T, d_k).
        v (Tensor): (B, H, T, d_v).
        g_fwd, g_bwd (Tensor): Log-gates <= 0, (B, H, T, d_k), in token
            order.
        scale (float, optional): Query scale. Defaults to d_k^-1/2.
        backend (str): 'torch' (any device), 'triton' (our fused kernels:
            CUDA, fp16 / bf16 / fp32, heads up to 64 wide), 'fla' (CUDA)
            or 'auto' (triton where it applies, else torch). While
            exporting, the plain-op form. Defaults to 'auto'.
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
    """:func:`bidirectional_gla` with log-gates ``gates(*gate_inputs)``
    that are recomputed in backward, not kept.

    Args:
        q, k (Tensor): (B, H, T, d_k).
        v (Tensor): (B, H, T, d_v).
        gates (Callable): Deterministic function of ``gate_inputs`` giving
            (g_fwd, g_bwd), each (B, H, T, d_k) <= 0 in token order; for
            the triton backend called with ``chunk=64`` where it takes
            that keyword (:func:`~.gates.log_gates`), for the gates' sums
            within chunks.
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
    """fla's ``chunk_gla``; an ImportError naming fla-core if missing."""
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
    """``(o^f + flip(o^b)) / 2`` in one ``chunk_gla`` call, the reversed
    sequences stacked along the batch in fla's (B, T, H, d) layout; the
    log-gates in fp32. q, k (B, H, T, d_k), v (B, H, T, d_v); returns
    (B, H, T, d_v) in v's dtype."""
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
