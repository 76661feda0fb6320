# DeiT-S student with ELU kernel linear attention, MLPCopy (MLPs copied), +
# attention-output distillation (lambda 50) from the frozen softmax teacher,
# on CIFAR-10 with the paper's recipe.
# Set the softmax checkpoint (mmpretrain, timm .pth/.safetensors, official
# DeiT release, ...): --cfg-options model.teacher_checkpoint=PATH
_base_ = ['../_base_/lvit/deit-s_mlpcopy-distill.py',
          '../_base_/datasets/cifar10_lvit.py']

model = dict(student=dict(
    head=dict(num_classes=10),
    backbone=dict(attn_cfg=dict(type='ELULinearAttention'))))
