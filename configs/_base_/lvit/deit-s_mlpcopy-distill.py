# The setting of the DeiT-S transfer grid
# (configs/lvit/deit-s_{operator}_mlpcopy-distill_{dataset}.py): a linear
# DeiT-S student whose MLPs are copied from the softmax DeiT-S teacher
# (MLPCopy), + attention-output distillation (lambda 50) from that frozen
# teacher. deit-s_mlpcopy-distill_{dataset}.py add a dataset, its schedule
# and the head's classes; a leaf config then sets the operator
# (model.student.backbone.attn_cfg).
_base_ = ['../models/lvit/deit-s_distill.py', '../default_runtime.py']

custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
