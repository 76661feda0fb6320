# The baseline: the small Mask R-CNN with a GLA backbone started at random
# (Random), no distillation.
_base_ = ['../_base_/dense/mask-rcnn_vit-tiny-p4_dense-fmnist.py']
