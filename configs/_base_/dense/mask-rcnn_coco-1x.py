# The recipe of the ViT-B Mask R-CNN configs (their model:
# ../models/dense/mask-rcnn_lvit-b_simple-fpn.py, listed next to it), COCO 1x
# (12 epochs, steps at 8 and 11, 500 warm-up iterations) with the optimiser
# of ViTDet's ViT-B (Li et al. 2022, arXiv:2203.16527): AdamW lr 1e-4,
# weight decay 0.1 but none on biases and norms, layer-wise lr decay 0.7;
# batch 16 = 8 x 2.
_base_ = [
    'mmdet::_base_/datasets/coco_instance.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    'mmdet::_base_/default_runtime.py',
]

optim_wrapper = dict(
    _delete_=True,
    type='mmpretrain.SkipNonFiniteOptimWrapper',
    optimizer=dict(
        type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1),
    paramwise_cfg=dict(layer_decay_rate=0.7, flat_decay_mult=0.0),
    constructor='mmpretrain.BackboneLayerDecayOptimWrapperConstructor')

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
