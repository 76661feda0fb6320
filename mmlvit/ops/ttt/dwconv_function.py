"""TTT's depthwise 3x3 conv inner model as autograd Functions (launch code
for :mod:`.dwconv_kernels`).

:class:`ConvSums` (k, v -> the inner gradient's raw sums R, fp32
(B, 9, d)) and :class:`~mmlvit.ops.recompute.OutputsOfStates` (q and a
function giving the stepped kernel W3' (B, 9, d), which calls ConvSums and
takes the clipped step in PyTorch -> o; :class:`ConvLaunch` runs its
kernels). Saved for backward: q, k, v (views of the caller's tensors) and
W3; the sums and the step are recomputed (one more reduction).
"""

import torch
import triton
from torch import Tensor

from ..fused_linear.function import BLOCK_N, token_splits
from ..recompute import OutputsOfStates
from . import dwconv_kernels as kernels
from .reference import normalised

NUM_WARPS = 4


def _empty_grid(like):
    """An empty (B, d, H, W) tensor laid out (B, H, W, d): token-major,
    so flattening the grid back into (B, H*W, d) tokens is a view."""
    B, d, H, W = like.shape
    return like.new_empty(B, H, W, d).permute(0, 3, 1, 2)


class ConvLaunch:
    """Shapes, token tiles and splits of one conv-head call; its states
    are the stepped kernel W3' (B, 9, d), fp32 (for
    :class:`~mmlvit.ops.recompute.OutputsOfStates`).

    Args:
        q (Tensor): (B, d, H, W).
    """

    def __init__(self, q):
        self.B, self.D, self.grid_h, self.grid_w = q.shape
        self.N = self.grid_h * self.grid_w
        self.tiles = triton.cdiv(self.N, BLOCK_N)
        self.splits, self.per_split = token_splits(self.tiles, self.B)
        self.constants = dict(
            BLOCK_N=BLOCK_N,
            BLOCK_D=max(16, triton.next_power_of_2(self.D)),
            num_warps=NUM_WARPS,
        )

    @property
    def sizes(self):
        """The kernels' D, grid_h, grid_w, N."""
        return self.D, self.grid_h, self.grid_w, self.N

    def partials(self, device):
        """An fp32 (B, splits, 9, d) buffer of per-split sums."""
        return torch.empty(self.B, self.splits, 9, self.D, device=device)

    def output(self, q, states):
        """o = dwconv3x3(q; W3') (B, d, H, W) in q's dtype, token-major."""
        (w,) = states
        o = _empty_grid(q)
        kernels.conv_output_kernel[(self.B, self.tiles)](
            q, o, w, *q.stride(), *o.stride(), *self.sizes,
            **self.constants,
        )  # fmt: skip
        return o

    def query_grads(self, q, do, states):
        """dq and the gradient of W3'."""
        (w,) = states
        dq = _empty_grid(q)
        dw = self.partials(q.device)
        kernels.conv_query_grad_kernel[(self.B, self.splits)](
            q, do, dq, w, dw, *q.stride(), *do.stride(), *dq.stride(),
            *self.sizes, self.splits, self.per_split, **self.constants,
        )  # fmt: skip
        return dq, (dw.sum(1),)


class ConvSums(torch.autograd.Function):
    """k, v (B, d, H, W) -> R (B, 9, d) fp32."""

    @staticmethod
    def forward(ctx, k, v, launch):
        r = launch.partials(k.device)
        kernels.conv_sums_kernel[(launch.B, launch.splits)](
            k, v, r, *k.stride(), *v.stride(), *launch.sizes,
            launch.splits, launch.per_split, **launch.constants,
        )  # fmt: skip
        ctx.save_for_backward(k, v)
        ctx.launch = launch
        return r.sum(1)

    @staticmethod
    def backward(ctx, dr):
        k, v = ctx.saved_tensors
        launch = ctx.launch
        dk, dv = _empty_grid(k), _empty_grid(v)
        kernels.conv_key_value_grad_kernel[(launch.B, launch.tiles)](
            k, v, dk, dv, dr.float().contiguous(),
            *k.stride(), *v.stride(), *dk.stride(), *dv.stride(),
            *launch.sizes, **launch.constants,
        )  # fmt: skip
        return dk, dv, None


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
    B, d = launch.B, launch.D
    factor = -scale / launch.N

    def stepped(k, v, w3):
        r = ConvSums.apply(k, v, launch)  # (B, 9, d)
        with torch.autocast(q.device.type, enabled=False):
            grad = (r * factor).transpose(1, 2).reshape(B, d, 3, 3)
            w = w3.float().reshape(1, d, 3, 3) - normalised(grad, (-2, -1))
        return (w.reshape(B, d, 9).transpose(1, 2),)

    return OutputsOfStates.apply(q, launch, stepped, k, v, w3)
