# ViT-B (DeiT-B shape) student with ReLU kernel linear attention, FullCopy
# (every shape-matching weight copied), + attention-output distillation
# (lambda 50) from the frozen softmax teacher, on ImageNet-1K with the
# paper's recipe.
# Set the softmax checkpoint (mmpretrain, timm .pth/.safetensors, official
# DeiT release, ...): --cfg-options model.teacher_checkpoint=PATH
_base_ = ['../_base_/lvit/vit-b_distill_in1k.py']

model = dict(student=dict(backbone=dict(
    attn_cfg=dict(type='ReLULinearAttention'))))
custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='FullCopy')]
