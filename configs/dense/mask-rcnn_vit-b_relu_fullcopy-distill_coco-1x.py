# The paper's COCO row (ReLU-B, FullCopy w/ distill): Mask R-CNN 1x on the ReLU
# linear ViT-B converted on ImageNet-1K (FullCopy + attention distillation).
# Paper: 42.4 box AP / 39.0 mask AP (softmax 42.9 / 39.4). The backbone is the
# ImageNet-1K student of configs/lvit/vit-b_relu_fullcopy-distill_in1k.py as
# its run saved it (an ordinary classifier checkpoint; position embeddings are
# resized); neck and heads start fresh. Another file:
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/models/dense/mask-rcnn_lvit-b_simple-fpn.py',
    '../_base_/dense/mask-rcnn_coco-1x.py',
]

model = dict(
    backbone=dict(
        attn_cfg=dict(type='ReLULinearAttention'),
        init_cfg=dict(
            type='Pretrained',
            checkpoint='work_dirs/vit-b_relu_fullcopy-distill_in1k/epoch_300.pth',
            prefix='backbone.')))
