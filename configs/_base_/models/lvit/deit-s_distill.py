# Linear DeiT-S student (224 px, patch 16; DeiT-S's shapes and state-dict
# names, no drop path, GatedLinearAttention by default: set
# model.student.backbone.attn_cfg) distilled from the frozen softmax DeiT-S
# teacher: loss = task + 50 * mean over blocks of MSE(student, teacher
# attention-module outputs). Set model.teacher_checkpoint to the softmax
# checkpoint (mmpretrain, timm .pth/.safetensors, official DeiT, ...).
# The teacher is the softmax ViT of the student's shapes with the same head,
# only run by the distiller (no drop path, no init).
# The shapes and head of both networks (a name with two leading underscores
# is not a key of the resolved config).
__shape = dict(arch='deit-small', img_size=224, patch_size=16)
__head = dict(
    type='VisionTransformerClsHead',
    num_classes=1000,
    in_channels=384,
    loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'))
model = dict(
    type='AttentionDistiller',
    student=dict(
        type='ImageClassifier',
        backbone=dict(
            __shape,
            type='LinearVisionTransformer',
            drop_path_rate=0.0,
            attn_cfg=dict(type='GatedLinearAttention')),
        neck=None,
        head=__head,
        init_cfg=[
            dict(type='TruncNormal', layer='Linear', std=.02),
            dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
        ]),
    teacher=dict(
        type='ImageClassifier',
        backbone=dict(__shape, type='VisionTransformer'),
        neck=None,
        head=__head),
    teacher_checkpoint=None,
    distill_losses=[dict(type='AttentionOutputMSE', loss_weight=50.)])
