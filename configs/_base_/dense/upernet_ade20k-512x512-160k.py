# The recipe of the ViT-B UperNet configs (their model:
# ../models/dense/upernet_lvit-b.py, listed next to it), ADE20K 512 x 512,
# 160k iterations: the recipe of MMSegmentation's MAE ViT-B UperNet (AdamW
# lr 1e-4, weight decay 0.05 but none on biases and norms, layer-wise lr
# decay 0.65, 1500 warm-up iterations then linear decay to 0; batch 16 =
# 8 x 2).
_base_ = [
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    'mmseg::_base_/schedules/schedule_160k.py',
]

optim_wrapper = dict(
    _delete_=True,
    type='mmpretrain.SkipNonFiniteOptimWrapper',
    optimizer=dict(
        type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(layer_decay_rate=0.65, flat_decay_mult=0.0),
    constructor='mmpretrain.BackboneLayerDecayOptimWrapperConstructor')
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0,
         end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=160000,
         by_epoch=False),
]

# mmlvit's plugin import and the reliability hooks of the classification
# runs (atomic checkpoints, exact resume, checkpoints checked against the
# model), named in mmpretrain's registry where mmlvit registers them.
custom_imports = dict(imports=['mmlvit'], allow_failed_imports=False)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=20),  # progress every 20 iters
    checkpoint=dict(type='mmpretrain.SafeCheckpointHook'),
    random_state=dict(type='mmpretrain.RandomStateHook'),
    strict_load=dict(type='mmpretrain.StrictLoadHook'),
)
