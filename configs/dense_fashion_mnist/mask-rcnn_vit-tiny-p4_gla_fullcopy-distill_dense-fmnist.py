# As mask-rcnn_vit-tiny-p4_gla_mlpcopy-distill_dense-fmnist.py, but the GLA
# backbone starts from everything the softmax classifier's backbone shares
# with it (FullCopy: embeddings, norms, attention projections, MLPs).
_base_ = ['./mask-rcnn_vit-tiny-p4_gla_mlpcopy-distill_dense-fmnist.py']

custom_hooks = [
    dict(type='mmpretrain.SoftmaxToLinearInitHook', setting='FullCopy'),
]
