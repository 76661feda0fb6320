# The softmax reference: the small UperNet on the tiny softmax ViT, its
# backbone copied whole from the softmax classifier (FullCopy).
_base_ = [
    '../_base_/models/dense/upernet_vit-tiny-p4.py',
    '../_base_/dense/upernet_vit-tiny-p4_dense-fmnist.py',
]

model = dict(backbone=dict(attn_cfg=dict(type='SoftmaxAttention')))
custom_hooks = [
    dict(type='mmpretrain.SoftmaxToLinearInitHook', setting='FullCopy',
         checkpoint='checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth'),
]
