"""Which tokens a LinearVisionTransformer carries, from its operators."""

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


def token_layout(attn_cfg, with_cls_token, out_type, pos_embed_type):
    """Fill in the class token, output type and position embedding the
    operators imply (see :class:`LinearVisionTransformer`); explicit values
    win unless they contradict an operator."""
    cfgs = attn_cfg if isinstance(attn_cfg, (list, tuple)) else [attn_cfg]
    patch_only = [
        cls.__name__
        for cls in (
            attention_class(cfg['type'])
            for cfg in cfgs
            if isinstance(cfg, dict) and 'type' in cfg
        )
        if cls.patch_tokens_only
    ]
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
