# The flagship operator on COCO: Mask R-CNN 1x on the GLA linear ViT-B (the
# model base's operator) converted on ImageNet-1K (MLPCopy + attention
# distillation). The backbone is the ImageNet-1K student of
# configs/lvit/vit-b_gla_copy-distill_in1k.py as its run saved it (an
# ordinary classifier checkpoint; position embeddings are resized); neck and
# heads start fresh. Another file:
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/models/dense/mask-rcnn_lvit-b_simple-fpn.py',
    '../_base_/dense/mask-rcnn_coco-1x.py',
]

model = dict(
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            checkpoint='work_dirs/vit-b_gla_copy-distill_in1k/epoch_300.pth',
            prefix='backbone.')))
