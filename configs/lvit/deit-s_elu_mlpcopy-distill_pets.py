# DeiT-S student with ELU kernel linear attention, MLPCopy (MLPs copied), +
# attention-output distillation (lambda 50) from the frozen softmax teacher,
# on Oxford-IIIT Pets with the paper's recipe.
# Set the softmax checkpoint (mmpretrain, timm .pth/.safetensors, official
# DeiT release, ...): --cfg-options model.teacher_checkpoint=PATH
_base_ = ['../_base_/lvit/deit-s_mlpcopy-distill-600e.py',
          '../_base_/datasets/pets_lvit.py']

model = dict(student=dict(
    head=dict(num_classes=37),
    backbone=dict(attn_cfg=dict(type='ELULinearAttention'))))
