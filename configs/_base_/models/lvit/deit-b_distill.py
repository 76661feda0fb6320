# Linear DeiT-B student distilled from a frozen softmax DeiT-B
# teacher: loss = task + 50 * mean over blocks of MSE(student, teacher
# attention-module outputs). Set model.teacher_checkpoint to the softmax
# checkpoint (mmpretrain, timm .pth/.safetensors, official DeiT, ...).
model = dict(
    type='AttentionDistiller',
    student=dict(
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
            loss=dict(
                type='LabelSmoothLoss', label_smooth_val=0.1,
                mode='original')),
        init_cfg=[
            dict(type='TruncNormal', layer='Linear', std=.02),
            dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
        ]),
    teacher=dict(
        type='ImageClassifier',
        backbone=dict(
            type='VisionTransformer',
            arch='deit-base',
            img_size=224,
            patch_size=16),
        neck=None,
        head=dict(
            type='VisionTransformerClsHead',
            num_classes=1000,
            in_channels=768,
            loss=dict(
                type='LabelSmoothLoss', label_smooth_val=0.1,
                mode='original'))),
    teacher_checkpoint=None,
    distill_losses=[dict(type='AttentionOutputMSE', loss_weight=50.)])
