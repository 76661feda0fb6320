"""Two attention operators that exist only for the tests: loaded as a
pytest plugin (``-p toy_operators``) they are registered before the
contract tests are collected, as a third-party operator would be."""

import torch
from mmpretrain.registry import MODELS

from mmlvit.models.attentions import BaseAttention


@MODELS.register_module(force=True)
class MeanPoolAttention(BaseAttention):
    """Every token receives the mean of all values: A = 1/N everywhere.
    Arguments as :class:`BaseAttention`."""

    short_name = 'meanpool'
    has_attention_map = True
    output_is_map_times_values = True

    def mix_tokens(self, x, hw_shape):
        _, _, v = self.split_heads(self.qkv(x))
        o = v.mean(dim=2, keepdim=True).expand_as(v)
        return self.output(self.merge_heads(o))

    def flops(self, num_tokens, hw_shape):
        return self.projection_flops(num_tokens) + num_tokens * self.embed_dims

    def compute_attention_map(self, x, hw_shape):
        B, N, _ = x.shape
        return x.new_full((B, self.num_heads, N, N), 1.0 / N)


@MODELS.register_module(force=True)
class WrongShapeAttention(MeanPoolAttention):
    """Breaks the contract: drops the last token."""

    short_name = 'wrongshape'

    def mix_tokens(self, x, hw_shape):
        return super().mix_tokens(x, hw_shape)[:, :-1]


def pytest_configure(config):
    """Nothing to configure: importing this plugin registered the
    operators."""
    torch.manual_seed(0)
