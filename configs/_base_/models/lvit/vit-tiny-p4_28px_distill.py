# The tiny linear student distilled from the frozen tiny softmax teacher
# (attention-output MSE, lambda 50). Set model.teacher_checkpoint.
# Both networks are read from the tiny softmax classifier
# (../vit-tiny-p4_28px.py):
# - the student is that classifier with the linear backbone of
#   vit-tiny-p4_28px.py (GatedLinearAttention by default) and without its
#   (zero) dropout settings;
# - the teacher is the softmax ViT of the same shapes and classes, only run
#   by the distiller (no dropout, init or loss).
_base_ = ['../vit-tiny-p4_28px.py']

model = dict(
    _delete_=True,
    type='AttentionDistiller',
    student=dict(
        _base_.model,
        backbone=dict(
            {
                key: value
                for key, value in _base_.model.backbone.items()
                if key not in ('drop_rate', 'drop_path_rate')
            },
            type='LinearVisionTransformer',
            attn_cfg=dict(type='GatedLinearAttention', chunk_size=16))),
    teacher=dict(
        type='ImageClassifier',
        backbone=dict(
            type='VisionTransformer',
            arch=_base_.model.backbone.arch,
            img_size=_base_.model.backbone.img_size,
            patch_size=_base_.model.backbone.patch_size,
            in_channels=_base_.model.backbone.in_channels),
        neck=None,
        head=dict(
            type=_base_.model.head.type,
            num_classes=_base_.model.head.num_classes,
            in_channels=_base_.model.head.in_channels)),
    teacher_checkpoint=None,
    distill_losses=[dict(type='AttentionOutputMSE', loss_weight=50.)])
