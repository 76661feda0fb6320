# Softmax to linear in the dense run, as
# upernet_vit-tiny-p4_gla_mlpcopy-distill_dense-fmnist.py, but the GLA
# backbone starts from everything the softmax classifier's backbone shares
# with it (FullCopy: embeddings, norms, attention projections, MLPs).
_base_ = [
    '../_base_/models/dense/upernet_vit-tiny-p4_distill.py',
    '../_base_/dense/upernet_vit-tiny-p4_dense-fmnist.py',
]

custom_hooks = [
    dict(type='mmpretrain.SoftmaxToLinearInitHook', setting='FullCopy'),
]
