"""The gated RMSNorm after GLA's scan, ``merge_heads(rms_norm(o) * w) *
silu(gate)``, with fused Triton kernels (:mod:`.norm_kernels`: one pass over
o and the gate forward, one backward) and the PyTorch reference."""

import torch.nn.functional as F
from torch import Tensor

from ..common.dispatch import use_fused
from ..common.precision import fp32_scope


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
        backend (str): ``'auto'`` (fused on CUDA, PyTorch elsewhere and
            while exporting), ``'triton'`` or ``'torch'``; see
            :func:`mmlvit.ops.common.dispatch.use_fused`.

    Returns:
        Tensor: (B, N, H d) in the gate's dtype.
    """
    # The kernels hold a few (64, d) fp32 tiles: no shared-memory limit.
    if use_fused(backend, o, gate[..., :1], needs_shared_memory=False):
        from .norm_function import fused_gated_rms_norm

        return fused_gated_rms_norm(o, gate, weight, eps)
    with fp32_scope(o, weight, gate) as (o32, weight32, gate32):
        normed = F.rms_norm(o32, (o.shape[-1],), weight32, eps)
        y = normed.transpose(1, 2).flatten(2) * F.silu(gate32)
    return y.to(gate.dtype)


__all__ = ['gated_rms_norm']
