"""Tiny ViT configs shared by the transfer tests."""

TINY_ARCH = dict(
    embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64
)


def backbone_cfg(
    attn=None, arch=TINY_ARCH, img_size=32, patch_size=8, **kwargs
):
    """A 1-channel ViT on a 4x4 patch grid: mmpretrain's softmax
    VisionTransformer (attn=None) or a LinearVisionTransformer (whose token
    layout follows the operator)."""
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


def classifier_cfg(backbone):
    return dict(
        type='ImageClassifier',
        backbone=backbone,
        head=dict(
            type='VisionTransformerClsHead',
            num_classes=10,
            in_channels=backbone['arch']['embed_dims'],
        ),
    )
