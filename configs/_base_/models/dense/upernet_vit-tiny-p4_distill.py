# The small UperNet (upernet_vit-tiny-p4.py) converted in the dense run
# itself: every block's attention output is distilled (MSE, lambda 50) from
# the frozen backbone of the tiny softmax classifier (no neck or heads). The
# run config adds the init hook that copies from that classifier.
_base_ = ['./upernet_vit-tiny-p4.py']

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
