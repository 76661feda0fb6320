"""Softmax attention, the teacher-side reference operator."""

import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS
from torch import Tensor

from .base import BaseAttention


@MODELS.register_module()
class SoftmaxAttention(BaseAttention):
    """Scaled dot-product softmax attention, O(N^2).

    Numerically the same function as mmpretrain's ``MultiheadAttention``
    (same ``qkv``/``proj`` layout, scale d^-1/2, SDPA), with the common
    ``forward(x, hw_shape)`` interface. Arguments as :class:`BaseAttention`.
    """

    short_name = 'softmax'
    linear_cost = False
    has_attention_map = True
    output_is_map_times_values = True
    drops_attention_map = True

    def mix_tokens(self, x: Tensor, hw_shape: tuple[int, int]) -> Tensor:
        q, k, v = self.split_heads(self.qkv(x))
        drop = self.attn_drop if self.training else 0.0
        o = F.scaled_dot_product_attention(q, k, v, dropout_p=drop)
        return self.output(self.merge_heads(o))

    def flops(self, num_tokens: int, hw_shape: tuple[int, int]) -> int:
        N, C = num_tokens, self.embed_dims
        return self.projection_flops(N) + 2 * 2 * N * N * C  # q k^T, A v

    def compute_attention_map(
        self, x: Tensor, hw_shape: tuple[int, int]
    ) -> Tensor:
        """softmax(q k^T / sqrt(d)): (B, h, N, N), rows sum to 1."""
        q, k, _ = self.split_heads(self.qkv(x))
        return torch.softmax(
            q @ k.transpose(-2, -1) * self.head_dims**-0.5, dim=-1
        )
