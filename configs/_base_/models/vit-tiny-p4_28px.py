# A DeiT-like tiny softmax ViT for 28 px single-channel images (7x7 patches of
# 4 px): embed 64, depth 4, 4 heads. The reference model of the small-scale
# experiments and the teacher of its students.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='VisionTransformer',
        arch=dict(embed_dims=64, num_layers=4, num_heads=4,
                  feedforward_channels=256),
        img_size=28,
        patch_size=4,
        in_channels=1,
        drop_rate=0.,
        drop_path_rate=0.),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=10,
        in_channels=64,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                  mode='original'),
        init_cfg=[dict(type='TruncNormal', layer='Linear', std=.02)]),
    # On the classifier, not the backbone: a child config can then load the
    # backbone with a plain dict (init_cfg=dict(type='Pretrained', ...)).
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
)
