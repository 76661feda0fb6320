# ViT-B (DeiT-B shape) student with ReLU kernel linear attention, Random
# init, no distillation, on ImageNet-1K with the paper's recipe.
_base_ = ['../_base_/lvit/vit-b_in1k.py']

model = dict(backbone=dict(attn_cfg=dict(type='ReLULinearAttention')))
