# Softmax to linear in the dense run: the small UperNet's GLA backbone
# starts from the tiny softmax classifier's MLPs (MLPCopy) and every block's
# attention output is distilled (MSE, lambda 50) from that classifier's
# frozen backbone (no neck or heads).
_base_ = [
    '../_base_/models/dense/upernet_vit-tiny-p4_distill.py',
    '../_base_/dense/upernet_vit-tiny-p4_dense-fmnist.py',
]

custom_hooks = [
    dict(type='mmpretrain.SoftmaxToLinearInitHook', setting='MLPCopy'),
]
