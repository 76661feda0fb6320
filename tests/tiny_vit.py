"""The tiny ViTs the tests build: width 32, depth 2, 2 heads, 1-channel
32 px images in 8 px patches (a 4x4 patch grid), 10 classes."""

import torch
from mmengine.config import ConfigDict
from mmpretrain.registry import MODELS

TINY_ARCH = dict(
    embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64
)
# A backbone without class token: pooled patch tokens, sin-cos positions.
NO_CLS = dict(
    with_cls_token=False, out_type='avg_featmap', pos_embed_type='sincos'
)
# The same tiny ViT as timm's VisionTransformer arguments.
TIMM_TINY = dict(
    img_size=32,
    patch_size=8,
    in_chans=1,
    num_classes=10,
    embed_dim=TINY_ARCH['embed_dims'],
    depth=TINY_ARCH['num_layers'],
    num_heads=TINY_ARCH['num_heads'],
    mlp_ratio=TINY_ARCH['feedforward_channels'] / TINY_ARCH['embed_dims'],
)


def backbone_cfg(
    attn=None, arch=TINY_ARCH, img_size=32, patch_size=8, **kwargs
):
    """A 1-channel ViT on a 4x4 patch grid: mmpretrain's softmax
    VisionTransformer (attn=None) or a LinearVisionTransformer with the
    operator ``attn`` (whose token layout follows the operator)."""
    cfg = dict(
        type='VisionTransformer',
        arch=arch,
        img_size=img_size,
        patch_size=patch_size,
        in_channels=1,
    )
    if attn is not None:
        cfg.update(type='LinearVisionTransformer', attn_cfg=dict(type=attn))
    cfg.update(kwargs)
    return cfg


def classifier_cfg(backbone, **kwargs):
    """An ImageClassifier of ``backbone`` with a 10-class ViT head."""
    return dict(
        type='ImageClassifier',
        backbone=backbone,
        head=dict(
            type='VisionTransformerClsHead',
            num_classes=10,
            in_channels=backbone['arch']['embed_dims'],
        ),
        **kwargs,
    )


def save_classifier(cfg, path, seed=0):
    """Build the classifier ``cfg`` (seeded, after init_weights()) and save
    it in mmpretrain's checkpoint format; returns ``path``."""
    torch.manual_seed(seed)
    model = MODELS.build(cfg)
    model.init_weights()
    torch.save(dict(state_dict=model.state_dict(), meta=dict()), path)
    return path


def build_distiller(teacher_ckpt, student, teacher, **kwargs):
    """An AttentionDistiller (or ``type=...``) after init_weights(), its
    student seeded with 1."""
    torch.manual_seed(1)
    kwargs.setdefault('type', 'AttentionDistiller')
    distiller = MODELS.build(
        ConfigDict(
            student=student,
            teacher=teacher,
            teacher_checkpoint=str(teacher_ckpt),
            **kwargs,
        )
    )
    distiller.init_weights()
    return distiller


def perturbed_timm_vit(**kwargs):
    """timm's VisionTransformer(**kwargs) (seed 0, eval mode) with every
    parameter shifted, so that no value is one a fresh init has."""
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    model = VisionTransformer(**kwargs).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.rand_like(param))
    return model


# timm's model sizes overridden: 3-channel 32 px images in 8 px patches,
# width 64, depth 2, 2 heads, 10 classes.
TIMM_FAMILY_TINY = dict(
    img_size=32,
    patch_size=8,
    embed_dim=64,
    depth=2,
    num_heads=2,
    num_classes=10,
)


def perturbed_timm_model(name, **kwargs):
    """``timm.create_model(name, pretrained=False, **kwargs)`` (seed 0,
    eval mode) with every parameter shifted, so that no value (class
    token, layer scales, LayerNorms...) is one a fresh init has."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, **kwargs).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.rand_like(param))
    return model
