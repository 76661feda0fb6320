"""Softmax attention, the teacher-side reference operator."""

import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS
from torch import Tensor

from mmlvit.ops.common.rope import apply_rope

from .base import BaseAttention


@MODELS.register_module()
class SoftmaxAttention(BaseAttention):
    """Scaled dot-product softmax attention, O(N^2).

    Numerically the same function as mmpretrain's ``MultiheadAttention``
    (same ``qkv``/``proj`` layout, scale d^-1/2, SDPA), with the common
    ``forward(x, hw_shape)`` interface. With ``rope`` tables the patch
    tokens of q and k are rotated before the product (EVA-02's attention,
    arXiv 2303.11331; the class token is not rotated). Arguments as
    :class:`BaseAttention`.
    """

    short_name = 'softmax'
    linear_cost = False
    has_attention_map = True
    output_is_map_times_values = True
    drops_attention_map = True
    supports_rope = True

    def mix_tokens(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        q, k, v = self.split_heads(self.qkv(x))
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        drop = self.attn_drop if self.training else 0.0
        o = F.scaled_dot_product_attention(q, k, v, dropout_p=drop)
        return self.output(self.merge_heads(o))

    def flops(self, num_tokens: int, hw_shape: tuple[int, int]) -> int:
        N, C = num_tokens, self.embed_dims
        return self.projection_flops(N) + 2 * 2 * N * N * C  # q k^T, A v

    def compute_attention_map(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        """softmax(q k^T / sqrt(d)) (q, k rotated with ``rope``): (B, h,
        N, N), rows sum to 1."""
        q, k, _ = self.split_heads(self.qkv(x))
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        return torch.softmax(
            q @ k.transpose(-2, -1) * self.head_dims**-0.5, dim=-1
        )
