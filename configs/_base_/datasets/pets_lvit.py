# Oxford-IIIT Pets (37 classes; 3,680 trainval / 3,669 test images) with the
# paper's recipe at 224 px (mmpretrain's OxfordIIITPet class).
# data_root = data/oxford-iiit-pet, the extracted images.tar.gz and
# annotations.tar.gz:
#   data/oxford-iiit-pet/images/Abyssinian_1.jpg ...
#   data/oxford-iiit-pet/annotations/trainval.txt, test.txt
# Batch: 64 per GPU x 8 GPUs = 512 in total (the paper's batch).
dataset_type = 'OxfordIIITPet'
data_root = 'data/oxford-iiit-pet'
data_preprocessor = dict(
    num_classes=37,
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
        split='trainval',
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
