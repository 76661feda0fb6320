# The tiny linear student distilled from the frozen tiny softmax teacher
# (attention-output MSE, lambda 50). Set model.teacher_checkpoint.
_arch = dict(embed_dims=64, num_layers=4, num_heads=4,
             feedforward_channels=256)

model = dict(
    type='AttentionDistiller',
    student=dict(
        type='ImageClassifier',
        backbone=dict(
            type='LinearVisionTransformer',
            arch=_arch,
            img_size=28,
            patch_size=4,
            in_channels=1,
            out_type='cls_token',
            attn_cfg=dict(type='GatedLinearAttention', chunk_size=16),
            init_cfg=[
                dict(type='TruncNormal', layer='Linear', std=.02),
                dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
            ]),
        neck=None,
        head=dict(
            type='VisionTransformerClsHead',
            num_classes=10,
            in_channels=64,
            loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                      mode='original'),
            init_cfg=[dict(type='TruncNormal', layer='Linear', std=.02)])),
    teacher=dict(
        type='ImageClassifier',
        backbone=dict(
            type='VisionTransformer',
            arch=_arch,
            img_size=28,
            patch_size=4,
            in_channels=1,
            out_type='cls_token'),
        neck=None,
        head=dict(
            type='VisionTransformerClsHead', num_classes=10,
            in_channels=64)),
    teacher_checkpoint=None,
    distill_losses=[dict(type='AttentionOutputMSE', loss_weight=50.)])
