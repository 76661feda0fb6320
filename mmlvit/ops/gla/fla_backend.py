"""The fla backend: bidirectional GLA by fla's Triton ``chunk_gla``
(fla-core, github.com/fla-org/flash-linear-attention)."""

import functools

import torch
from torch import Tensor

from ..common.triton_runtime import fused_entry


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
