# Linear DeiT-B student distilled from a frozen softmax DeiT-B
# teacher: loss = task + 50 * mean over blocks of MSE(student, teacher
# attention-module outputs). Set model.teacher_checkpoint to the softmax
# checkpoint (mmpretrain, timm .pth/.safetensors, official DeiT, ...).
# Both networks are read from the linear DeiT-B classifier (deit-b.py):
# - the student is that classifier (its token layout follows the operator:
#   class token, or none and the patch average for patch-tokens-only ones);
# - the teacher is the softmax ViT of the same shapes with the same head,
#   only run by the distiller (no drop path, no init).
_base_ = ['./deit-b.py']

model = dict(
    _delete_=True,
    type='AttentionDistiller',
    student=_base_.model,
    teacher=dict(
        type='ImageClassifier',
        backbone=dict(
            type='VisionTransformer',
            arch=_base_.model.backbone.arch,
            img_size=_base_.model.backbone.img_size,
            patch_size=_base_.model.backbone.patch_size),
        neck=None,
        head=_base_.model.head),
    teacher_checkpoint=None,
    distill_losses=[dict(type='AttentionOutputMSE', loss_weight=50.)])
