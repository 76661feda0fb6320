# Linear DeiT-B classifier (224 px, patch 16): DeiT-B's shapes and
# state-dict names with a pluggable attention operator
# (model.backbone.attn_cfg, GatedLinearAttention by default). Drop path 0.1
# and label smoothing 0.1 as in the recipe.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='LinearVisionTransformer',
        arch='deit-base',
        img_size=224,
        patch_size=16,
        drop_path_rate=0.1,
        attn_cfg=dict(type='GatedLinearAttention')),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=1000,
        in_channels=768,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                  mode='original')),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
)
