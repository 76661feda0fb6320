"""MHLA: block-mixed ReLU linear attention with a value conv."""

import torch.nn as nn
from mmpretrain.registry import MODELS
from torch import Tensor

from mmlvit.ops import depthwise_conv
from mmlvit.ops.common.dispatch import check_backend
from mmlvit.ops.common.tracing import exporting
from mmlvit.ops.mhla import (
    mhla_attention,
    mhla_attention_map,
    mhla_linear_mixing,
)

from .base import BaseAttention


@MODELS.register_module()
class MHLAttention(BaseAttention):
    """Multi-head linear attention (Zhang et al. ICLR 2026), paper form.

    Per head, ReLU-kernel key-value summaries of each of the s x s spatial
    blocks are mixed by the learned ``mixing`` matrix W (M x M, M = s^2,
    init "linear", kept in [0, 1]: see :meth:`mixing_weights`); a
    5x5 depthwise conv of the values (``lepe``) is added before ``proj``.
    Patch tokens only (``LinearVisionTransformer`` then builds no class
    token). At any resolution the grid keeps s x s blocks of side ceil(H/s) x
    ceil(W/s) (W stays reusable); see :func:`mmlvit.ops.mhla_attention`.

    Args:
        blocks_per_side (int): s. Defaults to 2 (four 7x7 blocks on a 14x14
            grid, Qin et al.'s setting).
        backend (str): The attention's and the value conv's path:
            ``'auto'`` (fused Triton kernels on CUDA, PyTorch elsewhere),
            ``'triton'`` or ``'torch'``, see
            :func:`mmlvit.ops.mhla_attention` and
            :func:`mmlvit.ops.depthwise_conv`. Defaults to 'auto'.
        **kwargs: :class:`BaseAttention`'s arguments (``embed_dims``,
            ``num_heads``, ``qkv_bias`` (DeiT's, so it copies),
            ``proj_drop``, ``init_cfg``).
    """

    short_name = 'mhla'
    patch_tokens_only = True
    has_attention_map = True

    def __init__(self, *args, blocks_per_side=2, backend='auto', **kwargs):
        check_backend(backend)
        super().__init__(*args, **kwargs)
        self.backend = backend
        embed_dims = self.embed_dims
        self.blocks_per_side = blocks_per_side
        self.mixing = nn.Parameter(mhla_linear_mixing(blocks_per_side))
        self.lepe = nn.Conv2d(
            embed_dims, embed_dims, 5, padding=2, groups=embed_dims
        )

    def value_conv(self, v: Tensor, hw_shape: tuple[int, int]) -> Tensor:
        """The 5x5 depthwise conv over all heads' values, reading them in
        place (:func:`mmlvit.ops.depthwise_conv`: fused on CUDA).

        Args:
            v (Tensor): (B, h, N, d).
            hw_shape (tuple[int, int]): Patch grid (H, W).

        Returns:
            Tensor: (B, N, C).
        """
        v = self.merge_heads(v)
        B, N, C = v.shape
        grid = v.reshape(B, *hw_shape, C).permute(0, 3, 1, 2)
        out = depthwise_conv(
            grid, self.lepe.weight, self.lepe.bias, backend=self.backend
        )
        # Both paths give a (B, H, W, C) layout: tokens again as a view.
        return out.permute(0, 2, 3, 1).reshape(B, N, C)

    def mixing_weights(self) -> Tensor:
        """W, first clamped to [0, 1] in place if an optimiser step moved
        it out (MHLA's training clamps W after every step; clamping before
        the next use gives every forward the same W without a hook).

        While the model is traced for export, W.clamp(0, 1) as a graph op
        instead (an in-place change behind a check of W's values cannot be
        traced), which gives the same W.

        Returns:
            Tensor: (M, M), the Parameter itself outside export.
        """
        W = self.mixing
        if exporting():
            return W.clamp(0, 1)
        # On the storage, as an optimiser step writes it: no autograd
        # version bump and no device-to-host sync to test the range first.
        W.data.clamp_(0, 1)
        return W

    def mix_tokens(self, x: Tensor, hw_shape: tuple[int, int]) -> Tensor:
        """(B, H*W, C) -> (B, H*W, C); never forms an N x N tensor."""
        q, k, v = self.split_heads(self.qkv(x))
        W = self.mixing_weights()
        out = mhla_attention(q, k, v, W, hw_shape, backend=self.backend)
        return self.output(
            self.merge_heads(out) + self.value_conv(v, hw_shape)
        )

    def flops(self, num_tokens: int, hw_shape: tuple[int, int]) -> int:
        N, C, d = num_tokens, self.embed_dims, self.head_dims
        M = self.blocks_per_side**2
        summaries = 2 * N * C * d + 2 * N * C  # phi(k)^T v and sum phi(k)
        mixing = 2 * M * M * (C * d + C)
        queries = 2 * N * C * d + 2 * N * C  # phi(q) S and phi(q) . z
        value_conv = 2 * N * C * 25
        return (
            self.projection_flops(N)
            + summaries
            + mixing
            + queries
            + value_conv
        )

    def compute_attention_map(
        self, x: Tensor, hw_shape: tuple[int, int]
    ) -> Tensor:
        """A_tj = W[i(t), b(j)] phi(q_t) . phi(k_j) / den_t: (B, h, N, N).

        Not formed by the model itself (the paper never materialises it);
        ``proj(merge_heads(A @ v) + value_conv(v))`` equals the forward.
        """
        q, k, _ = self.split_heads(self.qkv(x))
        return mhla_attention_map(q, k, self.mixing_weights(), hw_shape)
