# Softmax to linear in the dense run, as
# mask-rcnn_vit-tiny-p4_gla_mlpcopy-distill_dense-fmnist.py, but the GLA
# backbone starts from everything the softmax classifier's backbone shares
# with it (FullCopy: embeddings, norms, attention projections, MLPs).
_base_ = ['../_base_/dense/mask-rcnn_vit-tiny-p4_dense-fmnist.py']

model = dict(
    _delete_=True,
    type='mmpretrain.DenseAttentionDistiller',
    student=_base_.model,
    teacher=dict(
        type='VisionTransformer',
        arch=_base_.model.backbone.arch,
        img_size=28,
        patch_size=4,
        in_channels=1),
    teacher_checkpoint='checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth',
    distill_losses=[dict(type='AttentionOutputMSE', loss_weight=50.)])
custom_hooks = [
    dict(type='mmpretrain.SoftmaxToLinearInitHook', setting='FullCopy'),
]
