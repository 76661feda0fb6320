# The tools' smoke config with random augmentation (RandomFlip) and
# deterministic kernels: a resumed run must reproduce the uninterrupted
# run's random draws to end with the same weights.
_base_ = ['./tiny_softmax_fmnist.py']

train_dataloader = dict(dataset=dict(pipeline={{_base_.train_pipeline}}))
train_cfg = dict(max_epochs=3)
randomness = dict(seed=0, deterministic=True)
