# Runtime: mmpretrain's defaults, plus the mmlvit plugin import so that the
# config also works under `mim train mmpretrain` and mmpretrain's own tools.
_base_ = ['mmpretrain::_base_/default_runtime.py']

custom_imports = dict(imports=['mmlvit'], allow_failed_imports=False)

# Checkpoints survive kills (atomic writes, old files deleted after the new
# one is complete, --resume takes the newest file that loads), and a resumed
# run draws the random numbers the uninterrupted run would have drawn.
default_hooks = dict(
    # Progress every 20 iterations (mmpretrain's 100 is longer than a small
    # run's epoch) and at the end of every epoch.
    logger=dict(type='LoggerHook', interval=20),
    checkpoint=dict(type='SafeCheckpointHook'),
    random_state=dict(type='RandomStateHook'),
    # A checkpoint that does not fit the model (load_from, tools/test.py,
    # --resume) is an error; allow_partial=True loads what matches.
    strict_load=dict(type='StrictLoadHook'),
)
