# vit-b_random-distill_in1k.py with the student initialised from the softmax
# teacher's checkpoint: MLPCopy (MLPs copied).
_base_ = ['./vit-b_random-distill_in1k.py']

custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
