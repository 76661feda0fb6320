# DeiT-S student with InLine attention, MLPCopy (MLPs copied), + attention-
# output distillation (lambda 50) from the frozen softmax teacher, on
# Food-101 with the paper's recipe.
# Set the softmax checkpoint (mmpretrain, timm .pth/.safetensors, official
# DeiT release, ...): --cfg-options model.teacher_checkpoint=PATH
_base_ = ['../_base_/lvit/deit-s_mlpcopy-distill.py',
          '../_base_/datasets/food101_lvit.py']

model = dict(student=dict(
    head=dict(num_classes=101),
    backbone=dict(attn_cfg=dict(type='InLineAttention'))))
