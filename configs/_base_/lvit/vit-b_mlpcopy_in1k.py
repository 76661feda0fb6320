# vit-b_random_in1k.py with the classifier initialised from a softmax DeiT-B
# checkpoint: MLPCopy (MLPs copied). Set it with
# --cfg-options custom_hooks.0.checkpoint=PATH.
_base_ = ['./vit-b_random_in1k.py']

custom_hooks = [
    dict(type='SoftmaxToLinearInitHook', checkpoint=None, setting='MLPCopy'),
]
