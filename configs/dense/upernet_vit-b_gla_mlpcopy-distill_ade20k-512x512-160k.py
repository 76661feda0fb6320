# The flagship operator on ADE20K: UperNet, 512 x 512, 160k iterations, on the
# GLA linear ViT-B (the model base's operator) converted on ImageNet-1K
# (MLPCopy + attention distillation). The backbone is the ImageNet-1K student
# of configs/lvit/vit-b_gla_copy-distill_in1k.py as its run saved it (an
# ordinary classifier checkpoint; position embeddings are resized to the 32 x
# 32 grid); neck and heads start fresh. Another file:
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/models/dense/upernet_lvit-b.py',
    '../_base_/dense/upernet_ade20k-512x512-160k.py',
]

model = dict(
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            checkpoint='work_dirs/vit-b_gla_copy-distill_in1k/epoch_300.pth',
            prefix='backbone.')))
