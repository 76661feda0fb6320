"""AttentionPoolingNeck: multihead attention pooling (MAP) with a learned
latent query (arXiv:1810.00825), the pooling head of SigLIP
(arXiv:2303.15343)."""

import torch
import torch.nn as nn
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.utils import build_norm_layer
from mmpretrain.registry import MODELS
from torch import Tensor


class PoolingMLP(nn.Module):
    """fc1 -> activation -> fc2, under the names timm gives them.

    Shapes: (..., C) -> (..., C), hidden width ``feedforward_channels``.
    """

    def __init__(self, embed_dims, feedforward_channels, act_cfg):
        super().__init__()
        self.fc1 = nn.Linear(embed_dims, feedforward_channels)
        self.act = MODELS.build(act_cfg)
        self.fc2 = nn.Linear(feedforward_channels, embed_dims)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


@MODELS.register_module()
class AttentionPoolingNeck(BaseModule):
    """Pool every token into one feature with a learned query.

    L latent queries (one for SigLIP) attend over all N tokens with
    softmax attention (heads h, head width d = C / h):

    - q = latent W_q + b_q (1, L, C); [k, v] = x W_kv + b_kv (B, N, 2C);
    - per head, a = softmax(q k^T / sqrt(d)) v, heads concatenated;
    - y = a W_proj + b_proj, then y = y + MLP(norm(y)) (a pre-norm MLP
      block on the pooled token, no residual around the attention);
    - the first latent's row y[:, 0] is the pooled feature.

    One query costs O(N) per image: the pooling stays softmax whatever
    operator mixes the tokens in the backbone. The backbone must give every
    token: ``out_type='raw'``, (B, N, C) after its final norm.

    Args:
        in_channels (int): Token width C.
        num_heads (int): Heads h, dividing C (the backbone's).
        feedforward_channels (int, optional): Hidden width of the MLP.
            Defaults to 4 * C.
        latent_len (int): Latent queries L. Defaults to 1.
        norm_cfg (dict, optional): The norm before the MLP. Defaults to
            ``dict(type='LN', eps=1e-6)``.
        act_cfg (dict, optional): The MLP's activation (mmpretrain's
            registry, e.g. ``dict(type='GELU', approximate='tanh')``).
            Defaults to exact GELU.
        init_cfg (dict, optional): mmengine init config.

    Shapes:
        inputs: a tuple of (B, N, C) token tensors.
        outputs: a tuple of (B, C) pooled features, one per input.
    """

    def __init__(
        self,
        in_channels,
        num_heads,
        feedforward_channels=None,
        latent_len=1,
        norm_cfg=None,
        act_cfg=None,
        init_cfg=None,
    ):
        super().__init__(init_cfg=init_cfg)
        if in_channels % num_heads:
            raise ValueError(
                f'num_heads={num_heads} must divide in_channels={in_channels}.'
            )
        self.in_channels, self.num_heads = in_channels, num_heads
        self.head_dims = in_channels // num_heads
        self.latent = nn.Parameter(torch.zeros(1, latent_len, in_channels))
        self.q = nn.Linear(in_channels, in_channels)
        self.kv = nn.Linear(in_channels, 2 * in_channels)
        self.proj = nn.Linear(in_channels, in_channels)
        self.norm = build_norm_layer(
            norm_cfg or dict(type='LN', eps=1e-6), in_channels
        )
        self.mlp = PoolingMLP(
            in_channels,
            feedforward_channels or 4 * in_channels,
            act_cfg or dict(type='GELU'),
        )

    def init_weights(self) -> None:
        """The configured init, and the latent drawn with std C^-1/2 as
        SigLIP's probe is (unless loading a pretrained file)."""
        super().init_weights()
        pretrained = (
            isinstance(self.init_cfg, dict)
            and self.init_cfg.get('type') == 'Pretrained'
        )
        if not pretrained:
            trunc_normal_(self.latent, std=self.in_channels**-0.5)

    def pool(self, x: Tensor) -> Tensor:
        """(B, N, C) tokens -> (B, C) pooled feature."""
        if x.dim() != 3 or x.shape[-1] != self.in_channels:
            raise ValueError(
                f'AttentionPoolingNeck pools (B, N, {self.in_channels}) '
                f"tokens, got {tuple(x.shape)}: set the backbone's "
                "out_type='raw' (every token after the final norm)."
            )
        B, N, C = x.shape
        h, d = self.num_heads, self.head_dims
        L = self.latent.shape[1]
        q = self.q(self.latent).reshape(1, L, h, d).transpose(1, 2)
        k, v = self.kv(x).reshape(B, N, 2, h, d).permute(2, 0, 3, 1, 4)
        # (1, h, L, d) @ (B, h, d, N) -> (B, h, L, N): softmax over tokens.
        attn = ((q * d**-0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(B, L, C)
        y = self.proj(y)
        y = y + self.mlp(self.norm(y))
        return y[:, 0]

    def forward(self, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """Pool each (B, N, C) input; returns a tuple of (B, C)."""
        if isinstance(inputs, Tensor):
            inputs = (inputs,)
        return tuple(self.pool(x) for x in inputs)
