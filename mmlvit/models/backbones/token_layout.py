"""Which tokens a LinearVisionTransformer carries, from its operators."""

import copy

from mmpretrain.registry import MODELS

from ..attentions import BaseAttention, registered_operators


def attention_class(attn_type):
    """The BaseAttention subclass an ``attn_cfg['type']`` names."""
    cls = MODELS.get(attn_type) if isinstance(attn_type, str) else attn_type
    if not (isinstance(cls, type) and issubclass(cls, BaseAttention)):
        known = registered_operators()
        raise ValueError(
            f'attn_cfg type {attn_type!r} is not a registered attention '
            f'operator; known operators: {", ".join(known)}.'
        )
    return cls


def patch_only_operators(attn_cfg):
    """Names of the operators in ``attn_cfg`` (one dict or one per layer)
    that mix patch tokens only (no token before the patches)."""
    cfgs = attn_cfg if isinstance(attn_cfg, (list, tuple)) else [attn_cfg]
    return [
        cls.__name__
        for cls in (
            attention_class(cfg['type'])
            for cfg in cfgs
            if isinstance(cfg, dict) and 'type' in cfg
        )
        if cls.patch_tokens_only
    ]


def token_layout(attn_cfg, with_cls_token, out_type, pos_embed_type):
    """Fill in the class token, output type and position embedding the
    operators imply (see :class:`LinearVisionTransformer`); explicit values
    win unless they contradict an operator."""
    patch_only = patch_only_operators(attn_cfg)
    if with_cls_token is None:
        with_cls_token = not patch_only
    elif with_cls_token and patch_only:
        raise ValueError(
            f'{patch_only[0]} mixes patch tokens only and takes no class '
            'token, but the config sets with_cls_token=True: remove it (the '
            'backbone then builds no class token, pools the patches and uses '
            'sin-cos positions).'
        )
    if out_type is None:
        out_type = 'cls_token' if with_cls_token else 'avg_featmap'
    elif out_type == 'cls_token' and not with_cls_token:
        reason = (
            f'{patch_only[0]} mixes patch tokens only'
            if patch_only
            else 'with_cls_token=False'
        )
        raise ValueError(
            f"out_type='cls_token' needs a class token, but {reason}: use "
            "out_type='avg_featmap' (or remove out_type)."
        )
    if pos_embed_type is None:
        pos_embed_type = 'sincos' if patch_only else 'learned'
    return with_cls_token, out_type, pos_embed_type


def per_layer_attn_cfgs(attn_cfg, num_layers):
    """Validate ``attn_cfg`` (one dict, or one per layer) and return a
    copy of it for each of the ``num_layers`` layers."""
    if isinstance(attn_cfg, dict):
        attn_cfgs = [attn_cfg] * num_layers
    elif isinstance(attn_cfg, (list, tuple)):
        if len(attn_cfg) != num_layers:
            raise ValueError(
                f'attn_cfg is a list of {len(attn_cfg)} configs but the '
                f'model has {num_layers} layers: give one dict for '
                'all layers or exactly one per layer.'
            )
        attn_cfgs = list(attn_cfg)
    else:
        raise TypeError(
            'attn_cfg must be a dict or a list of dicts, got '
            f'{type(attn_cfg).__name__}.'
        )
    for i, cfg in enumerate(attn_cfgs):
        if not isinstance(cfg, dict) or 'type' not in cfg:
            raise ValueError(
                f'attn_cfg for layer {i} must be a dict with '
                f'a "type", got {cfg!r}.'
            )
        for key in ('embed_dims', 'num_heads'):
            if key in cfg:
                raise ValueError(
                    f'attn_cfg for layer {i} sets {key!r}; it comes from '
                    'arch, remove it.'
                )
        attention_class(cfg['type'])
    return [copy.deepcopy(cfg) for cfg in attn_cfgs]
