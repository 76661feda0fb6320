"""A softmax ViT's architecture, read off its weights.

A checkpoint in mmpretrain keys (:func:`~.readers.load_softmax_checkpoint`)
states everything about its ViT but the head count: width and patch size
from the patch embedding, depth from the block indices, MLP width from the
first MLP layer, image size from the learned position table, classes from
the head. The heads follow the family (:mod:`.family_defaults`). The family's
structure is read off its keys too (layer scales, tokens, pre-norm,
SwiGLU, pooling, no qkv bias, no position table), and what they cannot
show from the family the reader found (CLIP's QuickGELU, the rotary
positions of EVA-02 and DINOv3, DINOv3's LayerNorm eps) or from a Runner's
config (:mod:`.trained_config`): see :attr:`ViTArch.backbone_options`.
"""

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from mmpretrain.models.backbones import VisionTransformer

from .errors import TransferError
from .family_defaults import (
    DEFAULT_NORM_EPS,
    FAMILY_ROPE,
    default_num_heads,
    unseen_settings,
)

# mmpretrain's zoo names for the standard shapes, preferred in configs.
ZOO_NAMES = ('deit-tiny', 'deit-small', 'deit-base', 'large', 'huge')
_BLOCK = re.compile(r'backbone\.layers\.(\d+)\.')
_PATCH = 'backbone.patch_embed.projection.weight'
_FFN = 'backbone.layers.0.ffn.layers.0.0.weight'
_SWIGLU = 'backbone.layers.0.ffn.w12.weight'
_HEAD, _POOL_FFN = 'head.layers.head.weight', 'neck.mlp.fc1.weight'


@dataclass(frozen=True)
class ViTArch:
    """What a ViT checkpoint's weights say about its model.

    Attributes:
        embed_dims, num_layers, num_heads, feedforward_channels (int): The
            transformer's shape.
        patch_size (int): Side of a patch.
        img_size (int): Side of the image the position table was trained
            for (224 when the file has no learned table).
        in_channels (int): Image channels.
        with_cls_token (bool): The file has a class token.
        num_classes (int, optional): Rows of the classifier; None without
            one.
        layer_scale (bool): Layer scales on both residual branches.
        dist_token (bool): A distillation token and a second head.
        pre_norm (bool): A LayerNorm before the blocks (CLIP).
        patch_bias (bool): The patch embedding has a bias.
        ffn_type (str): ``'origin'`` (MLP), ``'swiglu'`` or
            ``'swiglu_norm'`` (EVA-02's hidden LayerNorm), see
            ``LinearTransformerEncoderLayer``.
        rope (dict, optional): The backbone's ``rope_cfg`` (EVA-02,
            DINOv3).
        num_register_tokens (int): DINOv2's registers.
        pooling (str, optional): How the model pools: ``'map'`` (an
            attention-pooling neck, SigLIP), ``'avg'`` (the mean of the
            patch tokens after the final norm, SigLIP's GAP variant, no
            class token), ``'avg_fc_norm'`` (the mean of the patch tokens,
            then a norm, timm's ``fc_norm``, and no final norm; EVA-02);
            None: mmpretrain's own (the class token, else
            ``avg_featmap``).
        pool_feedforward_channels (int, optional): The MLP width of the
            attention-pooling neck.
        qkv_bias (bool): ``attn.qkv`` has a bias.
        abs_pos_embed (bool): A learned position table; False: rotary
            positions only (DINOv3).
        norm_eps (float): The LayerNorms' eps.
        input_norm (dict, optional): The family's input mean and std.
    """

    embed_dims: int
    num_layers: int
    num_heads: int
    feedforward_channels: int
    patch_size: int
    img_size: int
    in_channels: int
    with_cls_token: bool
    num_classes: int | None = None
    layer_scale: bool = False
    dist_token: bool = False
    pre_norm: bool = False
    patch_bias: bool = True
    ffn_type: str = 'origin'
    rope: dict | None = None
    num_register_tokens: int = 0
    pooling: str | None = None
    pool_feedforward_channels: int | None = None
    qkv_bias: bool = True
    abs_pos_embed: bool = True
    norm_eps: float = DEFAULT_NORM_EPS
    input_norm: dict | None = None

    def backbone_options(self) -> dict:
        """What ``LinearVisionTransformer`` needs beyond the shape to
        compute this family's function (empty for a plain ViT/DeiT): layer
        scales (any positive init: the copy sets them), the tokens, CLIP's
        pre-norm with QuickGELU and LN eps 1e-5, the patch and qkv biases,
        the LN eps, a SwiGLU ``ffn_type``, ``rope_cfg`` (with
        ``pos_embed_type='none'`` without a position table) and the pooling
        (``out_type``, see :attr:`neck`)."""
        options = {}
        if self.layer_scale:
            options['layer_scale_init_value'] = 1e-5
        if self.dist_token:
            options['with_dist_token'] = True
        if self.pre_norm:
            options.update(
                pre_norm=True,
                norm_cfg=dict(type='LN', eps=1e-5),
                layer_cfgs=dict(act_cfg=dict(type='QuickGELU')),
            )
        if self.norm_eps != DEFAULT_NORM_EPS:
            options['norm_cfg'] = dict(type='LN', eps=self.norm_eps)
        if not self.qkv_bias:
            options['qkv_bias'] = False
        if not self.abs_pos_embed:
            options['pos_embed_type'] = 'none'
        if self.patch_bias == self.pre_norm:
            # mmpretrain drops the patch bias exactly with pre_norm.
            options['patch_cfg'] = dict(bias=self.patch_bias)
        if self.ffn_type != 'origin':
            options.setdefault('layer_cfgs', {})['ffn_type'] = self.ffn_type
        if self.rope is not None:
            options['rope_cfg'] = dict(self.rope)
        if self.num_register_tokens:
            options['num_register_tokens'] = self.num_register_tokens
        if self.pooling == 'avg_fc_norm':
            options.update(out_type='avg_featmap', final_norm=False)
        elif self.pooling is not None:
            out_type = 'raw' if self.pooling == 'map' else 'featmap'
            options.update(with_cls_token=False, out_type=out_type)
        return options

    @property
    def neck(self) -> dict | None:
        """The classifier's neck: ``AttentionPoolingNeck`` (MAP, the
        backbone's heads) or ``GlobalAveragePooling`` (GAP over the patch
        map), None for mmpretrain's own pooling."""
        if self.pooling == 'map':
            return dict(
                type='AttentionPoolingNeck',
                in_channels=self.embed_dims,
                num_heads=self.num_heads,
                feedforward_channels=self.pool_feedforward_channels,
            )
        if self.pooling == 'avg':
            return dict(type='GlobalAveragePooling')
        return None

    @property
    def head_type(self) -> str:
        """The classifier head: ``'DeiTClsHead'`` (mean of the class and
        distillation heads) with a distillation token, else
        ``'VisionTransformerClsHead'``."""
        return 'DeiTClsHead' if self.dist_token else 'VisionTransformerClsHead'

    @property
    def arch(self) -> str | dict:
        """mmpretrain's ``arch``: a zoo name when the shape is one, else
        the shape as a dict."""
        shape = self.shape()
        for name in ZOO_NAMES:
            if VisionTransformer.arch_zoo[name] == shape:
                return name
        return shape

    def shape(self) -> dict:
        """The transformer's shape as mmpretrain's custom ``arch`` dict."""
        return dict(
            embed_dims=self.embed_dims,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            feedforward_channels=self.feedforward_channels,
        )

    def describe(self) -> str:
        """One line, e.g. 'deit-tiny (C=192, 12 layers, 3 heads, MLP 768),
        patch 16, 224 px, 3 channels, class token, 1000 classes'."""
        arch = self.arch if isinstance(self.arch, str) else 'custom'
        head = (
            f'{self.num_classes} classes'
            if self.num_classes
            else 'no classifier'
        )
        return (
            f'{arch} (C={self.embed_dims}, {self.num_layers} layers, '
            f'{self.num_heads} heads, MLP {self.feedforward_channels}), '
            f'patch {self.patch_size}, {self.img_size} px, '
            f'{self.in_channels} channels, '
            f'{"class token" if self.with_cls_token else "no class token"}'
            f', {head}{self._family_text()}'
        )

    def _family_text(self):
        parts = [
            text
            for present, text in (
                (self.layer_scale, 'layer scale'),
                (self.dist_token, 'distillation token'),
                (self.pre_norm, 'pre-norm (CLIP: QuickGELU, LN eps 1e-5)'),
                (not self.patch_bias, 'no patch bias'),
                (self.ffn_type != 'origin', f'{self.ffn_type} MLP'),
                (self.pooling == 'avg_fc_norm', 'average pooling'),
                (self.rope is not None, 'rotary positions'),
                (
                    self.num_register_tokens,
                    f'{self.num_register_tokens} registers',
                ),
                (self.pooling == 'map', 'attention pooling (MAP)'),
                (self.pooling == 'avg', 'average pooling after the norm'),
            )
            if present
        ]
        return ''.join(f', {part}' for part in parts)


def infer_vit_arch(
    state_dict: Mapping[str, torch.Tensor],
    num_heads: int | None = None,
    name: str = 'the checkpoint',
) -> ViTArch:
    """Read a ViT's architecture off its weights.

    Args:
        state_dict (Mapping[str, Tensor]): mmpretrain classifier keys, as
            :func:`~.readers.load_softmax_checkpoint` returns them.
        num_heads (int, optional): The head count, which weights cannot
            show. Defaults to the Runner config's (:mod:`.trained_config`),
            else the standard zoo's for the width (:func:`default_num_heads`).
        name (str): The file, for messages.

    Returns:
        ViTArch

    Raises:
        TransferError: A part the shape is read from is missing or
            inconsistent, or the head count cannot be guessed (pass it).
    """
    ffn = _SWIGLU if _SWIGLU in state_dict else _FFN
    missing = [k for k in (_PATCH, ffn) if k not in state_dict]
    if missing:
        raise TransferError(
            f'Cannot read a ViT architecture off {name}: it has no '
            f'{" or ".join(missing)}.'
        )
    embed_dims, in_channels, patch_h, patch_w = state_dict[_PATCH].shape
    if patch_h != patch_w:
        raise TransferError(
            f'{name} has {patch_h}x{patch_w} patches; only square patches '
            'are supported.'
        )
    num_layers = len(
        {int(m.group(1)) for m in map(_BLOCK.match, state_dict) if m}
    )
    family = getattr(state_dict, 'family', None)
    unseen = unseen_settings(state_dict)
    num_heads = num_heads or unseen.get('num_heads')
    if num_heads is None:
        num_heads = default_num_heads(embed_dims, family)
        if num_heads is None:
            raise TransferError(
                f'{name} is {embed_dims} wide, not a standard ViT width '
                'nor a multiple of 64: pass the number of heads.'
            )
    if embed_dims % num_heads:
        raise TransferError(
            f'{num_heads} heads do not divide the width {embed_dims} of '
            f'{name}.'
        )
    with_cls_token = 'backbone.cls_token' in state_dict
    dist_token = 'backbone.dist_token' in state_dict
    img_size = 224
    pos_embed = state_dict.get('backbone.pos_embed')
    if pos_embed is not None:
        patches = pos_embed.shape[1] - int(with_cls_token) - int(dist_token)
        side = math.isqrt(patches)
        if side * side != patches:
            raise TransferError(
                f'The position table of {name} has {patches} patch '
                'positions, not a square grid.'
            )
        img_size = side * patch_h
    head = state_dict.get(_HEAD)
    pool_ffn = state_dict.get(_POOL_FFN)
    return ViTArch(
        embed_dims=embed_dims,
        num_layers=num_layers,
        num_heads=num_heads,
        feedforward_channels=state_dict[ffn].shape[0]
        // (2 if ffn == _SWIGLU else 1),
        patch_size=patch_h,
        img_size=img_size,
        in_channels=in_channels,
        with_cls_token=with_cls_token,
        num_classes=None if head is None else head.shape[0],
        layer_scale='backbone.layers.0.attn.gamma1.weight' in state_dict,
        dist_token=dist_token,
        pre_norm='backbone.pre_norm.weight' in state_dict,
        patch_bias='backbone.patch_embed.projection.bias' in state_dict,
        ffn_type=_ffn_type(state_dict, ffn),
        rope=unseen['rope'],
        num_register_tokens=(
            state_dict['backbone.reg_token'].shape[1]
            if 'backbone.reg_token' in state_dict
            else 0
        ),
        pooling=_pooling(state_dict, with_cls_token),
        pool_feedforward_channels=(
            None if pool_ffn is None else pool_ffn.shape[0]
        ),
        qkv_bias='backbone.layers.0.attn.qkv.bias' in state_dict,
        abs_pos_embed=unseen.get(
            'abs_pos_embed', pos_embed is not None or family not in FAMILY_ROPE
        ),
        norm_eps=unseen['norm_eps'],
        input_norm=unseen['input_norm'],
    )


def _ffn_type(state_dict, ffn):
    if ffn != _SWIGLU:
        return 'origin'
    if 'backbone.layers.0.ffn.norm.weight' in state_dict:
        return 'swiglu_norm'
    return 'swiglu'


def _pooling(state_dict, with_cls_token):
    """'map' with an attention-pooling neck; 'avg_fc_norm' with a norm
    after the mean and none before it; 'avg' without a class token when
    the final norm comes before the mean; else None."""
    final_norm = 'backbone.ln1.weight' in state_dict
    fc_norm = 'backbone.ln2.weight' in state_dict
    if 'neck.latent' in state_dict:
        return 'map'
    if fc_norm and not final_norm:
        return 'avg_fc_norm'
    if not with_cls_token and final_norm and not fc_norm:
        return 'avg'
    return None
