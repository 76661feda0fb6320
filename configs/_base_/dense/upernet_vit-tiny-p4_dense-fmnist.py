# The recipe of the small UperNet on Dense Fashion-MNIST (the model:
# ../models/dense/upernet_vit-tiny-p4.py, or its distillation
# upernet_vit-tiny-p4_distill.py, listed next to this file by each config):
# the data, ../schedules/dense_fmnist_8e.py, MMSegmentation's runtime, the
# plugin import and the reliability hooks, the best checkpoint by mIoU.
_base_ = [
    '../datasets/dense_fashion_mnist_seg.py',
    'mmseg::_base_/default_runtime.py',
    '../schedules/dense_fmnist_8e.py',
]

custom_imports = dict(imports=['mmlvit'], allow_failed_imports=False)
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=20),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='mmpretrain.SafeCheckpointHook', interval=2,
                    max_keep_ckpts=1, save_best='mIoU', rule='greater'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    random_state=dict(type='mmpretrain.RandomStateHook'),
    strict_load=dict(type='mmpretrain.StrictLoadHook'),
)
log_processor = dict(by_epoch=True)
randomness = dict(seed=0)
