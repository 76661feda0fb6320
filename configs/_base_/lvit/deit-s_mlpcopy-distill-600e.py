# The DeiT-S transfer grid (deit-s_mlpcopy-distill.py) on the datasets
# trained for 600 epochs (Flowers-102, Oxford-IIIT Pets): 100 warm-up epochs
# then cosine to 1e-6, as ../schedules/lvit_transfer-600e.py.
_base_ = [
    '../models/lvit/deit-s_distill.py',
    '../schedules/lvit_in1k.py',
    '../default_runtime.py',
]

param_scheduler = [
    dict(_base_.param_scheduler[0], end=100),  # linear warm-up
    dict(_base_.param_scheduler[1], begin=100, end=600),  # cosine
]
train_cfg = dict(max_epochs=600)
custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
