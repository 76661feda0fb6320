"""timm ViT keys -> mmpretrain ``ImageClassifier(VisionTransformer)`` keys.

Target keys: ``backbone.{cls_token,pos_embed}``,
``backbone.patch_embed.projection.*``, ``backbone.layers.{i}.{ln1,
attn.qkv, attn.proj, ln2, ffn.layers.0.0, ffn.layers.1}.*``,
``backbone.ln1.*`` (final norm), ``backbone.ln2.*`` (timm's ``fc_norm``),
``head.layers.head.*``. The families of
:mod:`.vit_families` add theirs: ``blocks.N.ls1.gamma``/``ls2.gamma`` (C,)
-> ``backbone.layers.N.attn.gamma1.weight``/``ffn.gamma2.weight``,
``dist_token`` (1, 1, C) -> ``backbone.dist_token``, ``head_dist.*`` ->
``head.layers.head_dist.*``, ``norm_pre.*`` -> ``backbone.pre_norm.*``,
EVA-02's SwiGLU ``blocks.N.mlp.{w12,w3,norm}.*`` (:mod:`.eva_blocks`) ->
``backbone.layers.N.ffn.{w12,w3,norm}.*``, DINOv2's ``reg_token`` (1, R, C)
-> ``backbone.reg_token`` and its packed SwiGLU ``mlp.fc1``/``fc2`` ->
``backbone.layers.N.ffn.w12``/``w3``, DINOv3's ``gamma_1``/``gamma_2``,
``reg_token``, q/v biases and SwiGLU (:mod:`.eva_blocks`) as above,
SigLIP's ``attn_pool.*`` ->
``neck.*`` (``AttentionPoolingNeck``: ``latent`` (1, L, C), ``q``, ``kv``,
``proj``, ``norm``, ``mlp.fc1``, ``mlp.fc2``).
"""

import math
import re
from collections import OrderedDict

import torch

from mmlvit.checkpoint import CheckpointError

from .dinov2_family import pack_swiglu, resample_position_table
from .dinov3_family import meta_to_timm
from .errors import preview_keys
from .eva_blocks import eva_to_vit_blocks
from .vit_families import (
    ATTN_POOL_KEYS,
    FAMILIES,
    SUPPORTED,
    identify_family,
)

_TOP_LEVEL = {
    'cls_token': 'backbone.cls_token',
    'dist_token': 'backbone.dist_token',
    'reg_token': 'backbone.reg_token',
    'pos_embed': 'backbone.pos_embed',
    'patch_embed.proj.weight': 'backbone.patch_embed.projection.weight',
    'patch_embed.proj.bias': 'backbone.patch_embed.projection.bias',
    'norm_pre.weight': 'backbone.pre_norm.weight',
    'norm_pre.bias': 'backbone.pre_norm.bias',
    'norm.weight': 'backbone.ln1.weight',
    'norm.bias': 'backbone.ln1.bias',
    'fc_norm.weight': 'backbone.ln2.weight',
    'fc_norm.bias': 'backbone.ln2.bias',
    'head.weight': 'head.layers.head.weight',
    'head.bias': 'head.layers.head.bias',
    'head_dist.weight': 'head.layers.head_dist.weight',
    'head_dist.bias': 'head.layers.head_dist.bias',
} | {key: 'neck.' + key.removeprefix('attn_pool.') for key in ATTN_POOL_KEYS}
_BLOCK_MODULES = {
    'norm1': 'ln1',
    'attn.qkv': 'attn.qkv',
    'attn.proj': 'attn.proj',
    'norm2': 'ln2',
    'mlp.fc1': 'ffn.layers.0.0',
    'mlp.fc2': 'ffn.layers.1',
    'mlp.w12': 'ffn.w12',
    'mlp.w3': 'ffn.w3',
    'mlp.norm': 'ffn.norm',
}
# Block key suffix -> mmpretrain suffix.
_BLOCK_SUFFIXES = {
    f'{module}.{kind}': f'{target}.{kind}'
    for module, target in _BLOCK_MODULES.items()
    for kind in ('weight', 'bias')
} | {
    'ls1.gamma': 'attn.gamma1.weight',
    'ls2.gamma': 'ffn.gamma2.weight',
    'gamma_1': 'attn.gamma1.weight',  # the official DeiT III release
    'gamma_2': 'ffn.gamma2.weight',
}
_BLOCK_KEY = re.compile(r'blocks\.(\d+)\.(.+)$')
# Pre-training-only tensors: MAE's decoder and mask token, iBOT's mask
# embedding, MoCo v3's projector (an MLP under ``head.<n>``).
PRETRAINING_ONLY = re.compile(
    r'(decoder_.*|mask_token|masked_embed|head\.\d+\..*)$'
)


def convert_timm(weights, name, format, img_size=None):
    """timm ViT keys -> mmpretrain classifier keys.

    Args:
        weights (Mapping[str, Tensor]): A timm-layout ViT state dict.
        name (str): The file, for messages.
        format (str): The format it is read as.
        img_size (int, optional): The model's image side: a DINOv2 position
            table for another one is resampled to it
            (:func:`~.dinov2_family.resample_position_table`).

    Returns:
        tuple[OrderedDict, list[str], str]: The converted state dict (its
        ``family`` attribute names the family), the dropped
        pre-training-only keys and the family
        (:data:`~.vit_families.FAMILIES`).

    Raises:
        CheckpointError: A key has no counterpart, or the family is not
            supported or only partly matched (:func:`identify_family`).
    """
    weights = meta_to_timm(weights, name)  # DINOv3 in Meta's layout
    family = identify_family(weights, name, format)
    if family in ('eva02', 'dinov3'):
        title = FAMILIES[family].title
        weights = eva_to_vit_blocks(weights, name, title, family == 'eva02')
    converted, dropped, unknown = OrderedDict(), [], []
    # What the weights cannot show (EVA-02's rotary positions) follows
    # the family; an attribute survives torch.save like ``_metadata``.
    converted.family = family
    for key, value in weights.items():
        target = _TOP_LEVEL.get(key)
        block = _BLOCK_KEY.match(key)
        if target is None and block is not None:
            index, suffix = block.groups()
            if suffix in _BLOCK_SUFFIXES:
                target = f'backbone.layers.{index}.{_BLOCK_SUFFIXES[suffix]}'
        if target is not None:
            converted[target] = value
        elif PRETRAINING_ONLY.match(key):
            dropped.append(key)
        else:
            unknown.append(key)
    if unknown:
        raise CheckpointError(
            f'Cannot convert {name} (read as {format!r}): {len(unknown)} keys '
            "have no counterpart in mmpretrain's VisionTransformer "
            f'classifier: {preview_keys(unknown, 12)}. Supported families: '
            f'{SUPPORTED}.'
        )
    _check_family_shapes(converted, name)
    _position_for_extra_tokens(converted)
    if family == 'dinov2':
        pack_swiglu(converted, name)
        if img_size:
            resample_position_table(converted, img_size, name)
    return converted, dropped, family


def _position_for_extra_tokens(state):
    """A ``pos_embed`` with patch rows only while the file has a class
    (and distillation) token, as DeiT III adds no position to its class
    token (timm's ``no_embed_class``): zero rows in front, which add
    nothing, so the model computes the same function with mmpretrain's
    one-table layout (1, extra + H*W, C)."""
    pos = state.get('backbone.pos_embed')
    extra = sum(f'backbone.{t}_token' in state for t in ('cls', 'dist'))
    if pos is None or pos.dim() != 3 or not extra:
        return
    if math.isqrt(pos.shape[1]) ** 2 == pos.shape[1]:
        zeros = pos.new_zeros(1, extra, pos.shape[2])
        state['backbone.pos_embed'] = torch.cat([zeros, pos], dim=1)


def _check_family_shapes(state, name):
    """Layer scales (C,), a distillation token (1, 1, C) and an attention
    pool's latent (1, L, C) and kv (2C, C) of the model's width C; a wrong
    size is an error naming the tensor."""
    patch = state.get('backbone.patch_embed.projection.weight')
    if patch is None:
        return
    width = patch.shape[0]
    wrong = [
        f'{key} {tuple(value.shape)}'
        for key, value in state.items()
        if (
            ('.gamma1.' in key or '.gamma2.' in key)
            and tuple(value.shape) != (width,)
        )
        or (key == 'backbone.dist_token' and value.shape != (1, 1, width))
        or (
            key == 'neck.latent'
            and (value.dim() != 3 or value.shape[::2] != (1, width))
        )
        or (key == 'neck.kv.weight' and value.shape != (2 * width, width))
    ]
    if wrong:
        raise CheckpointError(
            f'{name}: {preview_keys(wrong, 6)} do not fit the model width '
            f'{width} (patch embedding {tuple(patch.shape)}): a layer scale '
            f'is ({width},), a distillation token (1, 1, {width}), an '
            f'attention-pool latent (1, L, {width}) and its kv '
            f'({2 * width}, {width}). The file '
            'is damaged or mixes two models.'
        )
