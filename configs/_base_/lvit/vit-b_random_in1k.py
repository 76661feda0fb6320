# The settings without distillation of the ViT-B ImageNet-1K grid
# (configs/lvit/vit-b_{operator}_{setting}_in1k.py): a linear ViT-B (DeiT-B
# shape) classifier with the paper's ImageNet-1K recipe (300 epochs, total
# batch 4096). Random init; vit-b_{attn,full,mlp}copy_in1k.py add the
# initialisation from a softmax DeiT-B checkpoint, a leaf config the operator.
_base_ = [
    '../models/lvit/deit-b.py',
    '../datasets/imagenet_bs64_lvit.py',
    '../schedules/lvit_in1k.py',
    '../default_runtime.py',
]
