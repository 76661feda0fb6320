"""Launch code of :mod:`.depthwise_kernels` and the depthwise convolution as an
autograd Function."""

import torch
import triton
from torch import Tensor
from torch.autograd.function import once_differentiable

from . import depthwise_kernels as kernels
from .linear_launch import token_splits
from .triton_runtime import fused_entry

# A program holds fp32 tiles of BLOCK_N tokens x 64 channels. The kernels
# stream their taps from the caches: tiles of 32 at 8 warps keep the most
# warps resident to hide that latency (README.md).
BLOCK_N = 32
NUM_WARPS = 8
MAX_BLOCK_C = 64  # channels per program


def empty_grid(like, dtype=None):
    """An empty (B, C, H, W) tensor laid out (B, H, W, C): token-major, so
    flattening the grid back into (B, H*W, C) tokens is a view."""
    B, C, H, W = like.shape
    dtype = dtype or like.dtype
    return like.new_empty(B, H, W, C, dtype=dtype).permute(0, 3, 1, 2)


def tap_weights(weight):
    """A (C, 1, KS, KS) conv weight as the kernels' fp32 (1, KS^2, C)."""
    C = weight.shape[0]
    return weight.float().reshape(1, C, -1).transpose(1, 2).contiguous()


class GridLaunch:
    """Shapes, token tiles, channel blocks and splits of one call on
    (B, C, H, W) grid tensors (any strides), kernel size ``ks``.

    Args:
        x (Tensor): (B, C, H, W).
        ks (int): Kernel size KS (odd).
    """

    def __init__(self, x, ks):
        self.B, self.C, self.grid_h, self.grid_w = x.shape
        self.ks = ks
        self.N = self.grid_h * self.grid_w
        self.tiles = triton.cdiv(self.N, BLOCK_N)
        block_c = min(MAX_BLOCK_C, max(16, triton.next_power_of_2(self.C)))
        self.channel_blocks = triton.cdiv(self.C, block_c)
        self.splits, self.per_split = token_splits(
            self.tiles, self.B * self.channel_blocks
        )
        self.constants = dict(
            KS=ks, BLOCK_N=BLOCK_N, BLOCK_C=block_c, num_warps=NUM_WARPS
        )

    @property
    def sizes(self):
        """The kernels' C, grid_h, grid_w, N."""
        return self.C, self.grid_h, self.grid_w, self.N

    def conv(self, x, weights, bias=None, flip=False):
        """sum_t w[t] * x[nbr_t(p)] (+ bias), or with ``flip`` the data
        gradient for ``x`` = the output's gradient: (B, C, H, W) in x's
        dtype, token-major.

        Args:
            weights (Tensor): fp32 (B or 1, KS^2, C), contiguous.
            bias (Tensor, optional): fp32 (C,).
        """
        y = empty_grid(x)
        grid = (self.B, self.tiles, self.channel_blocks)
        options = self.conv_constants(
            per_image=weights.shape[0] > 1,
            has_bias=bias is not None,
            flip=flip,
        )
        kernels.conv_kernel[grid](
            x, y, weights, weights if bias is None else bias,
            *x.stride(), *y.stride(), *self.sizes, **options,
        )  # fmt: skip
        return y

    def conv_constants(self, per_image, has_bias, flip):
        """:meth:`conv`'s compile-time options: weights per image (else
        one set), a bias, the data gradient's flipped taps."""
        flags = dict(PER_IMAGE=per_image, HAS_BIAS=has_bias, FLIP=flip)
        return dict(self.constants, **flags)

    def weight_grads(self, x, g):
        """dw[b, t] = sum_p g[p] * x[nbr_t(p)] per image: fp32
        (B, KS^2, C)."""
        dw = torch.empty(
            self.B, self.splits, self.ks**2, self.C, device=x.device
        )
        grid = (self.B, self.splits, self.channel_blocks)
        kernels.weight_grad_kernel[grid](
            x, g, dw, *x.stride(), *g.stride(), *self.sizes,
            self.splits, self.per_split, **self.constants,
        )  # fmt: skip
        return dw.sum(1)


class DepthwiseConv(torch.autograd.Function):
    """x (B, C, H, W), weight (C, 1, KS, KS), bias (C,) or None -> y
    (B, C, H, W) in x's dtype, token-major. Saves x and the weight."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        launch = GridLaunch(x, weight.shape[-1])
        fp32_bias = None if bias is None else bias.float().contiguous()
        y = launch.conv(x, tap_weights(weight), fp32_bias)
        ctx.save_for_backward(x, weight)
        ctx.launch, ctx.has_bias = launch, bias is not None
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        launch = ctx.launch
        dx = launch.conv(dy, tap_weights(weight), flip=True)
        dw = launch.weight_grads(x, dy).sum(0)  # (KS^2, C)
        dw = dw.t().reshape(weight.shape).to(weight.dtype)
        db = (
            dy.float().sum((0, 2, 3)).to(weight.dtype)
            if ctx.has_bias
            else None
        )
        return dx, dw, db


@fused_entry
def fused_depthwise_conv(
    x: Tensor, weight: Tensor, bias: Tensor | None = None
) -> Tensor:
    """Depthwise KS x KS convolution (zero padding KS // 2) in fused Triton
    kernels: :func:`torch.nn.functional.conv2d` with ``groups=C``.

    Args:
        x (Tensor): (B, C, H, W), fp32/bf16/fp16, any strides (e.g. a view
            of token-major (B, H*W, C) tokens, read in place).
        weight (Tensor): (C, 1, KS, KS), KS odd.
        bias (Tensor, optional): (C,).

    Returns:
        Tensor: (B, C, H, W) in x's dtype, laid out (B, H, W, C).
    """
    return DepthwiseConv.apply(x, weight, bias)
