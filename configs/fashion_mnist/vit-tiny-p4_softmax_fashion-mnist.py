# Softmax ViT-tiny trained from scratch on Fashion-MNIST (28 px).
# Train: python tools/train.py CONFIG (this file).
_base_ = [
    '../_base_/models/vit-tiny-p4_28px.py',
    '../_base_/datasets/fashion_mnist_bs64.py',
    '../_base_/schedules/small_adamw.py',
    '../_base_/default_runtime.py',
]
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50),
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=2,
                    save_best='auto'),
)
