"""TTT's depthwise 3x3 conv inner model as autograd Functions, on the
depthwise-convolution kernels (:mod:`mmlvit.ops.common.depthwise_kernels`).

The inner step's raw sums R[t] = sum_p k[nbr_t(p)] v[p] are the weight
gradient of a convolution of k with output gradient v, so every launch is
one of those kernels: :class:`ConvSums` (k, v -> R, fp32 (B, 9, d);
backward dv = conv(k; dR), dk = the data gradient of v under dR) and
:class:`~mmlvit.ops.common.recompute.OutputsOfStates` (q and a function giving
the stepped kernel W3' (B, 9, d), which calls ConvSums and takes the
clipped step in PyTorch -> o = conv(q; W3'); :class:`ConvLaunch` runs its
kernels). Saved for backward: q, k, v (views of the caller's tensors) and
W3; the sums and the step are recomputed (one more reduction).
"""

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..common.depthwise_function import GridLaunch
from ..common.recompute import OutputsOfStates
from ..common.triton_runtime import fused_entry
from .naive import normalised


class ConvLaunch(GridLaunch):
    """:class:`GridLaunch` of a 3x3 conv head; its states are the stepped
    kernel W3' (B, 9, d), fp32."""

    def __init__(self, q):
        super().__init__(q, 3)

    def output(self, q, states):
        """o = dwconv3x3(q; W3') (B, d, H, W) in q's dtype, token-major."""
        return self.conv(q, states[0])

    def query_grads(self, q, do, states):
        """dq and the gradient of W3'."""
        dq = self.conv(do, states[0], flip=True)
        return dq, (self.weight_grads(q, do),)


class ConvSums(torch.autograd.Function):
    """k, v (B, d, H, W) -> R (B, 9, d) fp32."""

    @staticmethod
    def forward(ctx, k, v, launch):
        ctx.save_for_backward(k, v)
        ctx.launch = launch
        return launch.weight_grads(k, v)

    @staticmethod
    @once_differentiable
    def backward(ctx, dr):
        k, v = ctx.saved_tensors
        launch = ctx.launch
        dr = dr.float().contiguous()
        return launch.conv(v, dr, flip=True), launch.conv(k, dr), None


@fused_entry
def fused_ttt_dwconv(
    q: Tensor, k: Tensor, v: Tensor, w3: Tensor, scale: float
) -> Tensor:
    """TTT's conv head in fused Triton kernels
    (:func:`mmlvit.ops.ttt.ttt_dwconv`).

    Args:
        q, k, v (Tensor): (B, d, H, W), fp32/bf16/fp16, any strides (e.g.
            views of a token-major ``qkv`` projection).
        w3 (Tensor): (d, 1, 3, 3) learned initial kernel.
        scale (float): eta.

    Returns:
        Tensor: (B, d, H, W) in the dtype of q, laid out (B, H, W, d).
    """
    launch = ConvLaunch(q)
    B, d = launch.B, launch.C
    factor = -scale / launch.N

    def stepped(k, v, w3):
        r = ConvSums.apply(k, v, launch)  # (B, 9, d)
        with torch.autocast(q.device.type, enabled=False):
            grad = (r * factor).transpose(1, 2).reshape(B, d, 3, 3)
            w = w3.float().reshape(1, d, 3, 3) - normalised(grad, (-2, -1))
        return (w.reshape(B, d, 9).transpose(1, 2),)

    return OutputsOfStates.apply(q, launch, stepped, k, v, w3)
