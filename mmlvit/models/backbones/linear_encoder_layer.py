"""A ViT encoder layer whose token mixer is any attention operator."""

import torch.nn as nn
from mmcv.cnn.bricks.drop import build_dropout
from mmcv.cnn.bricks.transformer import FFN
from mmengine.model import BaseModule
from mmpretrain.models.utils import (
    LayerScale,
    SwiGLUFFN,
    SwiGLUFFNFused,
    build_norm_layer,
)
from mmpretrain.registry import MODELS
from torch import Tensor


class LinearTransformerEncoderLayer(BaseModule):
    """A ViT encoder layer whose token mixer is any attention operator.

    Same computation and state-dict names as mmpretrain's
    ``TransformerEncoderLayer`` (``ln1``, ``attn.qkv``, ``attn.proj``,
    ``attn.gamma1``, ``ln2``, ``ffn``), with two differences:

    - ``attn`` is built from ``attn_cfg`` and also receives the patch grid;
    - drop path and layer scale are applied here, so ``attn``'s output is the
      bare operator output (what distillation hooks on ``attn`` record). The
      layer scale is stored as ``attn.gamma1``, where mmpretrain keeps it.

    Args:
        embed_dims (int): Token width C.
        num_heads (int): Attention heads.
        feedforward_channels (int): FFN hidden width.
        attn_cfg (dict): Attention operator config, ``type`` plus its own
            arguments; width, heads, ``qkv_bias``, ``attn_drop`` and
            ``proj_drop`` are filled in here (the last three may be
            overridden).
        layer_scale_init_value (float): Layer-scale init; 0 disables it.
        drop_rate (float): Dropout after the attention and FFN projections.
        attn_drop_rate (float): Attention-map dropout (operators with a map).
        drop_path_rate (float): Stochastic depth rate.
        num_fcs (int): Linear layers in the FFN. Defaults to 2.
        qkv_bias (bool): Bias in ``attn.qkv``. Defaults to True.
        ffn_type (str): ``'origin'`` (MLP), ``'swiglu_fused'`` (hidden
            width rounded from 2/3 of ``feedforward_channels``),
            ``'swiglu'`` (SwiGLU of exactly ``feedforward_channels``) or
            ``'swiglu_norm'`` (the same with a norm of ``norm_cfg`` on the
            hidden units, EVA-02's sub-LN).
        act_cfg (dict, optional): FFN activation, any of mmpretrain's (e.g.
            ``dict(type='QuickGELU')`` for CLIP). Defaults to GELU.
        norm_cfg (dict, optional): Norm layers. Defaults to LN.
        init_cfg (dict, optional): mmengine init config.
    """

    def __init__(
        self,
        embed_dims,
        num_heads,
        feedforward_channels,
        attn_cfg,
        layer_scale_init_value=0.0,
        drop_rate=0.0,
        attn_drop_rate=0.0,
        drop_path_rate=0.0,
        num_fcs=2,
        qkv_bias=True,
        ffn_type='origin',
        act_cfg=None,
        norm_cfg=None,
        init_cfg=None,
    ):
        super().__init__(init_cfg=init_cfg)
        act_cfg = act_cfg or dict(type='GELU')
        norm_cfg = norm_cfg or dict(type='LN')
        self.embed_dims = embed_dims
        self.ln1 = build_norm_layer(norm_cfg, embed_dims)
        # Operators are registered in mmpretrain's MODELS: build them there
        # whatever scope the caller runs in (e.g. an mmseg or mmdet config
        # with backbone type 'mmpretrain.LinearVisionTransformer').
        with MODELS.switch_scope_and_registry('mmpretrain') as registry:
            self.attn = registry.build(
                dict(
                    embed_dims=embed_dims,
                    num_heads=num_heads,
                    qkv_bias=qkv_bias,
                    attn_drop=attn_drop_rate,
                    proj_drop=drop_rate,
                )
                | dict(attn_cfg)
            )
        if layer_scale_init_value > 0:
            self.attn.gamma1 = LayerScale(embed_dims, layer_scale_init_value)
        else:
            self.attn.gamma1 = nn.Identity()
        self.drop_path = build_dropout(
            dict(type='DropPath', drop_prob=drop_path_rate)
        )
        self.ln2 = build_norm_layer(norm_cfg, embed_dims)

        ffn_drop_path = dict(type='DropPath', drop_prob=drop_path_rate)
        if ffn_type == 'origin':
            # mmpretrain's scope: its activations (e.g. QuickGELU) resolve.
            with MODELS.switch_scope_and_registry('mmpretrain'):
                self.ffn = FFN(
                    embed_dims=embed_dims,
                    feedforward_channels=feedforward_channels,
                    num_fcs=num_fcs,
                    ffn_drop=drop_rate,
                    dropout_layer=ffn_drop_path,
                    act_cfg=act_cfg,
                    layer_scale_init_value=layer_scale_init_value,
                )
        elif ffn_type == 'swiglu_fused':
            self.ffn = SwiGLUFFNFused(
                embed_dims=embed_dims,
                feedforward_channels=feedforward_channels,
                layer_scale_init_value=layer_scale_init_value,
            )
        elif ffn_type in ('swiglu', 'swiglu_norm'):
            self.ffn = SwiGLUFFN(
                embed_dims=embed_dims,
                feedforward_channels=feedforward_channels,
                layer_scale_init_value=layer_scale_init_value,
                dropout_layer=ffn_drop_path,
                norm_cfg=norm_cfg if ffn_type == 'swiglu_norm' else None,
            )
        else:
            raise ValueError(
                f"Unknown ffn_type {ffn_type!r}; use 'origin', "
                "'swiglu_fused', 'swiglu' or 'swiglu_norm'."
            )

    @property
    def norm1(self) -> nn.Module:
        return self.ln1

    @property
    def norm2(self) -> nn.Module:
        return self.ln2

    def init_weights(self) -> None:
        """Default inits, then mmpretrain's FFN init (Xavier weights)."""
        super().init_weights()
        for m in self.ffn.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.normal_(m.bias, std=1e-6)

    def forward(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        """(B, N, C) tokens on an (H, W) patch grid -> (B, N, C); ``rope``
        (RopeTables, optional) goes to the attention."""
        extra = {} if rope is None else dict(rope=rope)
        x = x + self.drop_path(
            self.attn.gamma1(self.attn(self.ln1(x), hw_shape, **extra))
        )
        return self.ffn(self.ln2(x), identity=x)
