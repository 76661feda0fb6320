# CIFAR-100 (100 classes; 50,000 train / 10,000 test 32 px images) upsampled
# to 224 px with the paper's recipe (mmpretrain's CIFAR100 class, no
# download).
# data_root = data/cifar100, holding the extracted cifar-100-python.tar.gz:
#   data/cifar100/cifar-100-python/train, test, meta
# Batch: 64 per GPU x 8 GPUs = 512 in total (the paper's batch).
dataset_type = 'CIFAR100'
data_root = 'data/cifar100'
data_preprocessor = dict(
    num_classes=100,
    # ImageNet mean/std (RGB); the pipeline yields BGR, to_rgb flips it.
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True,
)

train_pipeline = [
    # mmpretrain's CIFAR yields RGB arrays; ColorJitter and the preprocessor
    # expect BGR (as LoadImageFromFile gives).
    dict(type='PILToNumpy', to_bgr=True),
    dict(
        type='RandomResizedCrop',
        scale=224,
        backend='pillow',
        interpolation='bicubic',
    ),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='ColorJitter', brightness=0.4, contrast=0.4, saturation=0.4),
    dict(type='PackInputs'),
]

# Center crop 0.9: shorter side to 224 / 0.9 = 249, then the central 224.
test_pipeline = [
    # mmpretrain's CIFAR yields RGB arrays; ColorJitter and the preprocessor
    # expect BGR (as LoadImageFromFile gives).
    dict(type='PILToNumpy', to_bgr=True),
    dict(
        type='ResizeEdge',
        scale=249,
        edge='short',
        backend='pillow',
        interpolation='bicubic',
    ),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=64,
    num_workers=8,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='train',
        download=False,
        pipeline=train_pipeline,
    ),
    sampler=dict(type='DefaultSampler', shuffle=True),
)
val_dataloader = dict(
    batch_size=128,
    num_workers=8,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='test',
        download=False,
        test_mode=True,
        pipeline=test_pipeline,
    ),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
