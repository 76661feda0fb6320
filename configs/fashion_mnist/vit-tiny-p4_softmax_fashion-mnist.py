# Softmax ViT-tiny trained from scratch on Fashion-MNIST (28 px).
# Train: python tools/train.py CONFIG (this file).
_base_ = [
    '../_base_/models/vit-tiny-p4_28px.py',
    '../_base_/datasets/fashion_mnist_bs64.py',
    '../_base_/schedules/small_adamw.py',
    '../_base_/default_runtime.py',
]

# Keep the last two epochs' checkpoints and the best.
default_hooks = dict(checkpoint=dict(max_keep_ckpts=2, save_best='auto'))
