# The flagship recipe at tiny scale: a GLA student whose MLPs are copied from
# the tiny softmax teacher (MLPCopy) and whose attention outputs are
# distilled from it (lambda 50), trained on the Fashion-MNIST 5k target.
# Teacher: checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth (made by
# tools/analysis/reproduce.py, or --cfg-options model.teacher_checkpoint=...).
_base_ = [
    '../_base_/models/lvit/vit-tiny-p4_28px_distill.py',
    '../_base_/datasets/fashion_mnist-5k_bs64.py',
    '../_base_/schedules/small_adamw.py',
    '../_base_/default_runtime.py',
]

model = dict(
    teacher_checkpoint='checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth')
custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
