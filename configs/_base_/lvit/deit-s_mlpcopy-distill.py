# The DeiT-S transfer grid
# (configs/lvit/deit-s_{operator}_mlpcopy-distill_{dataset}.py) on the
# datasets trained for 300 epochs: the linear DeiT-S student whose MLPs are
# copied from the softmax DeiT-S teacher (MLPCopy), + attention-output
# distillation (lambda 50) from that frozen teacher, with the paper's
# transfer recipe (its ImageNet-1K recipe at a total batch of 512). A leaf
# config adds the dataset, the head's classes and the operator
# (model.student.backbone.attn_cfg). deit-s_mlpcopy-distill-600e.py: the
# same for 600 epochs.
_base_ = [
    '../models/lvit/deit-s_distill.py',
    '../schedules/lvit_in1k.py',
    '../default_runtime.py',
]

custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
