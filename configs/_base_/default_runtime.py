# Runtime: MMPretrain's default runtime written out, plus the mmlvit plugin
# import (so that the config also works under `mim train mmpretrain` and
# mmpretrain's own tools) and the reliability hooks.
default_scope = 'mmpretrain'
custom_imports = dict(imports=['mmlvit'], allow_failed_imports=False)

# Checkpoints survive kills (atomic writes, old files deleted after the new
# one is complete, --resume takes the newest file that loads), and a resumed
# run draws the random numbers the uninterrupted run would have drawn.
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    # Progress every 20 iterations (mmpretrain's 100 is longer than a small
    # run's epoch) and at the end of every epoch.
    logger=dict(type='LoggerHook', interval=20),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='SafeCheckpointHook', interval=1),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='VisualizationHook', enable=False),
    random_state=dict(type='RandomStateHook'),
    # A checkpoint that does not fit the model (load_from, tools/test.py,
    # --resume) is an error; allow_partial=True loads what matches.
    strict_load=dict(type='StrictLoadHook'),
)

env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'),
)

vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)

log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=None, deterministic=False)
