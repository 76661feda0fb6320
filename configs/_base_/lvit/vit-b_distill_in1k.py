# The distilled settings of the ViT-B ImageNet-1K grid
# (configs/lvit/vit-b_{operator}_{setting}-distill_in1k.py): the linear ViT-B
# (DeiT-B shape) student + attention-output distillation from the frozen
# softmax DeiT-B teacher, with the paper's ImageNet-1K recipe (300 epochs,
# total batch 4096), from random init. A leaf config adds the operator and,
# for the Copy settings, the init hook (it copies from the teacher's
# checkpoint). Set that checkpoint: --cfg-options model.teacher_checkpoint=PATH
# (mmpretrain, timm .pth/.safetensors, official DeiT, ...).
_base_ = [
    '../models/lvit/deit-b.py',
    '../datasets/imagenet_bs64_lvit.py',
    '../schedules/lvit_in1k.py',
    '../default_runtime.py',
]

# loss = task + 50 * mean over blocks of MSE(student, teacher attention-module
# outputs). The student is the linear classifier (its token layout follows
# the operator: class token, or none and the patch average for
# patch-tokens-only ones); the teacher is the softmax ViT of the same shapes
# with the same head, only run by the distiller (no drop path, no init).
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
