"""Depthwise KS x KS convolution on token grids (MHLA's value conv), with
fused Triton kernels that read token-major tensors in place
(:mod:`.depthwise_kernels`, also the kernels of TTT's conv head), and the
choice between them and PyTorch's convolution."""

import torch
import torch.nn.functional as F
from torch import Tensor

from .dispatch import use_fused


def depthwise_conv(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, backend='auto'
) -> Tensor:
    """``F.conv2d(x, weight, bias, padding=KS // 2, groups=C)``.

    Args:
        x (Tensor): (B, C, H, W).
        weight (Tensor): (C, 1, KS, KS), KS odd.
        bias (Tensor, optional): (C,).
        backend (str): ``'auto'`` (fused on CUDA, PyTorch elsewhere and
            while exporting), ``'triton'`` or ``'torch'``; see
            :func:`mmlvit.ops.common.dispatch.use_fused`.

    Returns:
        Tensor: (B, C, H, W). The fused path's is token-major and in x's
        dtype; PyTorch's in channels-last layout (faster for depthwise
        convolutions on the CPU).
    """
    # Any channel count: the kernels take the channels in blocks, so only
    # the device and the dtype are checked (on a one-column view); they
    # need a few KB of shared memory, which any GPU has.
    if use_fused(backend, x[..., :1], needs_shared_memory=False):
        from .depthwise_function import fused_depthwise_conv

        return fused_depthwise_conv(x, weight, bias)
    x = x.contiguous(memory_format=torch.channels_last)
    return F.conv2d(
        x, weight, bias, padding=weight.shape[-1] // 2, groups=x.shape[1]
    )
