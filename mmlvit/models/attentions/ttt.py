"""TTT: the token mixer of the ViT^3 block (test-time training)."""

import torch
import torch.nn as nn
from mmpretrain.registry import MODELS
from torch import Tensor

from mmlvit.ops.common.dispatch import check_backend
from mmlvit.ops.ttt import ttt_dwconv, ttt_swiglu

from .base import BaseAttention


@MODELS.register_module()
class TTTAttention(BaseAttention):
    """ViT^3 test-time-training attention (Han et al. CVPR 2026).

    Each image fits two inner models to its keys and values with one
    closed-form, norm-clipped gradient step and applies them to its queries
    (see :mod:`mmlvit.ops.ttt`): a SwiGLU model per head (``w1``, ``w2``,
    each (1, h, d, d)) and a 3x3 depthwise conv (``w3``, (d, 1, 3, 3)) as one
    extra head on the patch grid. ``qkv`` has 3C + 3d rows laid out
    [q1 C | k1 C | v1 C | q2 d | k2 d | v2 d] (the first 3C copy from a
    softmax ViT); ``proj`` maps the C + d concatenated outputs back to C.
    Patch tokens only (``LinearVisionTransformer`` then builds no class
    token). The output is not linear in the values, so there is no attention
    map.

    Args:
        backend (str): Both heads' path: ``'auto'`` (fused Triton
            kernels on CUDA, PyTorch elsewhere), ``'triton'`` or
            ``'torch'``, see :func:`mmlvit.ops.ttt_swiglu`. Defaults to
            'auto'.
        **kwargs: :class:`BaseAttention`'s arguments (d = C / h).
    """

    short_name = 'ttt'
    patch_tokens_only = True

    def __init__(self, *args, backend='auto', **kwargs):
        check_backend(backend)
        super().__init__(*args, **kwargs)
        self.backend = backend
        d, num_heads = self.head_dims, self.num_heads
        self.w1 = nn.Parameter(torch.empty(1, num_heads, d, d))
        self.w2 = nn.Parameter(torch.empty(1, num_heads, d, d))
        self.w3 = nn.Parameter(torch.empty(d, 1, 3, 3))
        # ViT^3's defaults: trunc_normal(0.02) weights, zero biases.
        for param in (
            self.qkv.weight,
            self.proj.weight,
            self.w1,
            self.w2,
            self.w3,
        ):
            nn.init.trunc_normal_(param, std=0.02)
        for layer in (self.qkv, self.proj):
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)

    @classmethod
    def extra_qkv_dims(cls, embed_dims: int, num_heads: int) -> int:
        """q2, k2, v2 of the conv head: 3d rows."""
        return 3 * (embed_dims // num_heads)

    @classmethod
    def proj_in_dims(cls, embed_dims: int, num_heads: int) -> int:
        """The C + d concatenated outputs of both heads."""
        return embed_dims + embed_dims // num_heads

    def mix_tokens(self, x: Tensor, hw_shape: tuple[int, int]) -> Tensor:
        """(B, H*W, C) -> (B, H*W, C)."""
        B, N, C = x.shape
        d = self.head_dims
        # One split, not two slices: backward writes qkv's gradient once
        # (a slice's gradient is a zero-filled copy of all of qkv).
        heads, conv = self.qkv(x).split([3 * C, 3 * d], dim=-1)
        q1, k1, v1 = self.split_heads(heads)
        q2, k2, v2 = conv.reshape(B, N, 3, d).permute(2, 0, 3, 1)
        q2, k2, v2 = (t.reshape(B, d, *hw_shape) for t in (q2, k2, v2))
        swiglu_out = ttt_swiglu(
            q1, k1, v1, self.w1, self.w2, backend=self.backend
        )
        conv_out = ttt_dwconv(q2, k2, v2, self.w3, backend=self.backend)
        swiglu_out = self.merge_heads(swiglu_out)
        conv_out = conv_out.flatten(2).transpose(1, 2)
        return self.output(torch.cat([swiglu_out, conv_out], dim=-1))

    def flops(self, num_tokens: int, hw_shape: tuple[int, int]) -> int:
        N, C, d = num_tokens, self.embed_dims, self.head_dims
        # SwiGLU head: k W1, k W2, G1, G2, q W1', q W2' (six N x d x d
        # products per head).
        swiglu = 6 * 2 * N * C * d
        # Conv head: the 9-tap gradient and the 9-tap output conv.
        dwconv = 2 * 2 * N * d * 9
        return self.projection_flops(N) + swiglu + dwconv
