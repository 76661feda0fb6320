# vit-b_random-distill_in1k.py with the student initialised from the softmax
# teacher's checkpoint: Copy (attention q, k, v, proj copied).
_base_ = ['./vit-b_random-distill_in1k.py']

custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='Copy')]
