# The softmax reference: UperNet on the softmax ViT-B/16 (DeiT-B), ADE20K
# 512 x 512, 160k iterations. The backbone starts from a softmax checkpoint
# (mmpretrain, timm .pth/.safetensors, official DeiT release, ...), copied
# whole (FullCopy); neck and heads start fresh. Set the checkpoint:
#   --cfg-options custom_hooks.0.checkpoint=PATH
_base_ = [
    '../_base_/models/dense/upernet_lvit-b.py',
    '../_base_/dense/upernet_ade20k-512x512-160k.py',
]

model = dict(backbone=dict(attn_cfg=dict(type='SoftmaxAttention')))
custom_hooks = [
    dict(type='mmpretrain.SoftmaxToLinearInitHook', setting='FullCopy',
         checkpoint='checkpoints/deit-base_in1k.pth'),
]
