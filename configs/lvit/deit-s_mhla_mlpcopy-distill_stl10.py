# DeiT-S student with MHLA (multi-head linear attention with block mixing),
# MLPCopy (MLPs copied), + attention-output distillation (lambda 50) from the
# frozen softmax teacher, on STL-10 with the paper's recipe.
# Set the softmax checkpoint (mmpretrain, timm .pth/.safetensors, official
# DeiT release, ...): --cfg-options model.teacher_checkpoint=PATH
_base_ = ['../_base_/lvit/deit-s_mlpcopy-distill.py',
          '../_base_/datasets/stl10_lvit.py']

model = dict(student=dict(
    head=dict(num_classes=10),
    backbone=dict(attn_cfg=dict(type='MHLAttention'))))
