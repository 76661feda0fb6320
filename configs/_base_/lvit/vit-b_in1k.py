# The ViT-B ImageNet-1K grid without distillation
# (configs/lvit/vit-b_{operator}_{setting}_in1k.py): a linear ViT-B (DeiT-B
# shape) classifier with the paper's ImageNet-1K recipe (300 epochs, total
# batch 4096), from random init. A leaf config adds the operator and, for
# the Copy settings, the init hook that copies weights from a softmax DeiT-B
# checkpoint (set it with --cfg-options custom_hooks.0.checkpoint=PATH).
_base_ = [
    '../models/lvit/deit-b.py',
    '../datasets/imagenet_bs64_lvit.py',
    '../schedules/lvit_in1k.py',
    '../default_runtime.py',
]
