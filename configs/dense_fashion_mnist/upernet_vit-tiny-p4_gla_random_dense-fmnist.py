# The baseline: the small UperNet with a GLA backbone started at random
# (Random), no distillation.
_base_ = [
    '../_base_/models/dense/upernet_vit-tiny-p4.py',
    '../_base_/dense/upernet_vit-tiny-p4_dense-fmnist.py',
]
