# Oxford Flowers-102 (102 classes) with the paper's recipe at 224 px
# (mmpretrain's Flowers102 class). The paper trains on the official train
# split (1,020 images) and tests on the test split (6,149); train+val (2,040)
# is --cfg-options train_dataloader.dataset.split=trainval.
# data_root = data/flowers102:
#   data/flowers102/jpg/image_00001.jpg ...    (from 102flowers.tgz)
#   data/flowers102/imagelabels.mat, setid.mat
# Batch: 64 per GPU x 8 GPUs = 512 in total (the paper's batch).
dataset_type = 'Flowers102'
data_root = 'data/flowers102'
data_preprocessor = dict(
    num_classes=102,
    # ImageNet mean/std (RGB); the pipeline yields BGR, to_rgb flips it.
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True,
)

train_pipeline = [
    dict(type='LoadImageFromFile'),
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
    dict(type='LoadImageFromFile'),
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
        pipeline=test_pipeline,
    ),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
