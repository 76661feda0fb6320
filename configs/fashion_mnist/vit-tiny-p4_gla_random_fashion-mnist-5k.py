# Tiny GLA student from random init on the Fashion-MNIST 5k target (the
# "Random" baseline of the small-scale experiments, no distillation).
_base_ = [
    '../_base_/models/lvit/vit-tiny-p4_28px.py',
    '../_base_/datasets/fashion_mnist-5k_bs64.py',
    '../_base_/schedules/small_adamw.py',
    '../_base_/default_runtime.py',
]
