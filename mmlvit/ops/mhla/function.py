"""MHLA's block-mixed attention in the fused kernels of
:mod:`mmlvit.ops.common.linear_function`: per-block states, mixed across
blocks in fp32 between the state and output launches."""

import torch
from torch import Tensor

from ..common.linear_function import SegmentStates
from ..common.linear_launch import Launch
from ..common.recompute import OutputsOfStates
from ..common.triton_runtime import fused_entry


@fused_entry
def fused_mhla_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mixing: Tensor,
    hw_shape: tuple[int, int],
    eps: float,
) -> Tensor:
    """MHLA's block-mixed attention in fused Triton kernels: per-block
    states of relu(k) + eps, mixed across blocks by ``mixing`` in fp32,
    read by each query's block (:func:`mmlvit.ops.mhla_attention`).

    Args:
        q, k, v (Tensor): (B, h, N, d), N = H*W patches in raster order.
        mixing (Tensor): (M, M), M = side^2.
        hw_shape (tuple[int, int]): Patch grid (H, W).
        eps (float): The feature map's and the denominator's term.

    Returns:
        Tensor: (B, h, N, d) in the dtype of ``q``, stored (B, N, h, d).
    """
    side = int(round(mixing.shape[0] ** 0.5))
    launch = Launch(q, v, 'mhla', eps, 1.0, blocks=(*hw_shape, side))

    def states(k, v, mixing):
        return mixed_states(*SegmentStates.apply(k, v, launch), mixing)

    return OutputsOfStates.apply(q, launch, states, k, v, mixing)


def mixed_states(s, z, zv, mixing):
    """MHLA's block states mixed across blocks by ``mixing`` W (M, M) in
    fp32: ``S'_i = sum_b W[i, b] S_b`` (the same for z; z_v, which MHLA
    does not use, as it is). s (B*H, M, BK, BV), z (B*H, M, BK).

    One batched product per head with W broadcast (not copied): the states
    are read and written once, in their layout, forward and backward (an
    einsum copied them into a blocks-first layout and back)."""
    with torch.autocast(s.device.type, enabled=False):
        w = mixing.float().expand(s.shape[0], -1, -1)
        s = torch.bmm(w, s.flatten(2)).view_as(s)
        z = torch.bmm(w, z)
    return s, z, zv
