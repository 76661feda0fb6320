# ViT-B (DeiT-B shape) student with TTT (ViT^3 test-time-training block),
# Random init, + attention-output distillation (lambda 50) from the frozen
# softmax teacher, on ImageNet-1K with the paper's recipe.
# Set the softmax checkpoint (mmpretrain, timm .pth/.safetensors, official
# DeiT release, ...): --cfg-options model.teacher_checkpoint=PATH
_base_ = ['../_base_/lvit/vit-b_distill_in1k.py']

model = dict(student=dict(backbone=dict(attn_cfg=dict(type='TTTAttention'))))
