# The distilled settings of the ViT-B ImageNet-1K grid
# (configs/lvit/vit-b_{operator}_{setting}-distill_in1k.py): a linear ViT-B
# (DeiT-B shape) student + attention-output distillation (lambda 50) from the
# frozen softmax DeiT-B teacher, with the paper's ImageNet-1K recipe (300
# epochs, total batch 4096). Random init; vit-b_{attn,full,mlp}copy-distill
# add the initialisation from the teacher, a leaf config the operator.
_base_ = [
    '../models/lvit/deit-b_distill.py',
    '../datasets/imagenet_bs64_lvit.py',
    '../schedules/lvit_in1k.py',
    '../default_runtime.py',
]
