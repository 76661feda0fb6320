# ViT-B (DeiT-B shape) student with TTT (ViT^3 test-time-training block),
# Copy (attention q, k, v, proj copied), no distillation, on ImageNet-1K with
# the paper's recipe.
# Set the softmax checkpoint (mmpretrain, timm .pth/.safetensors, official
# DeiT release, ...): --cfg-options custom_hooks.0.checkpoint=PATH
_base_ = ['../_base_/lvit/vit-b_in1k.py']

model = dict(backbone=dict(attn_cfg=dict(type='TTTAttention')))
custom_hooks = [
    dict(type='SoftmaxToLinearInitHook', checkpoint=None, setting='Copy'),
]
