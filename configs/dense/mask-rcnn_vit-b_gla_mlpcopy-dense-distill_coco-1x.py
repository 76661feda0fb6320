# Softmax to linear in the dense run itself: the GLA ViT-B backbone of the
# Mask R-CNN starts from a softmax ViT-B checkpoint with MLPCopy and every
# block's attention output is distilled (MSE, lambda 50) from the frozen
# softmax backbone (no neck or heads) during the COCO fine-tuning.
# Checkpoints hold the detector alone. Set the softmax checkpoint:
#   --cfg-options model.teacher_checkpoint=PATH
_base_ = [
    '../_base_/models/dense/mask-rcnn_lvit-b_simple-fpn.py',
    '../_base_/dense/mask-rcnn_coco-1x.py',
]

model = dict(
    _delete_=True,
    type='mmpretrain.DenseAttentionDistiller',
    student=_base_.model,
    teacher=dict(type='VisionTransformer', arch='b', img_size=1024,
                 patch_size=16),
    teacher_checkpoint='checkpoints/deit-base_in1k.pth',
    distill_losses=[dict(type='AttentionOutputMSE', loss_weight=50.)])
custom_hooks = [
    dict(type='mmpretrain.SoftmaxToLinearInitHook', setting='MLPCopy',
         checkpoint=None),
]
