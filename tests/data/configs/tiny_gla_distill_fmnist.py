# A tiny GLA student distilled from the tiny softmax ViT of
# tiny_softmax_fmnist.py (its teacher) on a Fashion-MNIST subset: the
# distiller's end-to-end smoke config. The teacher checkpoint serves both the
# MLPCopy initialisation and the teacher; give it on the command line:
#   --cfg-options model.teacher_checkpoint=T.pth
_base_ = ['./tiny_softmax_fmnist.py']

teacher = {{_base_.model}}
student = dict(
    type='ImageClassifier',
    backbone=dict(
        type='LinearVisionTransformer',
        attn_cfg=dict(type='GatedLinearAttention'),
        arch=dict(
            embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64
        ),
        img_size=28,
        patch_size=7,
        in_channels=1,
    ),
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=10,
        in_channels=32,
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'
        ),
    ),
)
model = dict(
    _delete_=True,
    type='AttentionDistiller',
    student=student,
    teacher=teacher,
    teacher_checkpoint=None,
    distill_losses=[dict(type='AttentionOutputMSE', loss_weight=50.0)],
)
custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
# A constant learning rate of 1e-2 from the first step, and every epoch's
# checkpoint kept.
optim_wrapper = dict(optimizer=dict(lr=1e-2))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
default_hooks = dict(checkpoint=dict(max_keep_ckpts=-1))
