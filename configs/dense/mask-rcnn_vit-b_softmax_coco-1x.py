# The softmax reference: Mask R-CNN on the softmax ViT-B/16 (DeiT-B) with
# a simple feature pyramid, COCO 1x. The backbone starts from a softmax
# checkpoint (any format mmlvit reads), copied whole (FullCopy); neck and
# heads start fresh. Set the checkpoint:
#   --cfg-options custom_hooks.0.checkpoint=PATH
_base_ = [
    '../_base_/models/dense/mask-rcnn_lvit-b_simple-fpn.py',
    '../_base_/dense/mask-rcnn_coco-1x.py',
]

model = dict(backbone=dict(attn_cfg=dict(type='SoftmaxAttention')))
custom_hooks = [
    dict(type='mmpretrain.SoftmaxToLinearInitHook', setting='FullCopy',
         checkpoint='checkpoints/deit-base_in1k.pth'),
]
