# Fashion-MNIST (28x28 grey, 10 classes) at its own size (7x7 patches of 4 px).
# Data: `apt-get install dataset-fashion-mnist` then
# `python tools/data/prepare_fashion_mnist.py` (extracts into data_root).
dataset_type = 'FashionMNIST'
data_root = 'data/fashion_mnist'
data_preprocessor = dict(num_classes=10, mean=[72.94], std=[90.02])

train_pipeline = [
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
# Grey 1-channel images; an image file read in colour (mmpretrain's
# inferencer on a path) is converted to grey first.
test_pipeline = [
    dict(type='MatchChannels', channels=1),
    dict(type='PackInputs'),
]

# Loading 28 px images costs little; on a 2-core machine worker processes
# would take cores from the tiny models' compute, so none are started.
# persistent_workers is stated because launchers other than ours (mim,
# mmpretrain's tools/train.py) default it to True, which torch refuses
# without workers.
train_dataloader = dict(
    batch_size=64,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        test_mode=False,
        download=False,
        pipeline=train_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True),
)
# The test split: the training loader in order, 256 images a batch, through
# the test pipeline.
val_dataloader = dict(
    train_dataloader,
    batch_size=256,
    dataset=dict(train_dataloader['dataset'], split='test', test_mode=True,
                 pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False))
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
