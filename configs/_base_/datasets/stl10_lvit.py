# STL-10 (10 classes; 5,000 train / 8,000 test 96 px images) upsampled to
# 224 px with the paper's recipe (mmlvit's STL10 class; the unlabelled
# split is not used).
# data_root = data/stl10, holding the extracted stl10_binary.tar.gz:
#   data/stl10/stl10_binary/train_X.bin, train_y.bin, test_X.bin,
#   test_y.bin (class_names.txt optional)
# Batch: 64 per GPU x 8 GPUs = 512 in total (the paper's batch).
dataset_type = 'STL10'
data_root = 'data/stl10'
data_preprocessor = dict(
    num_classes=10,
    # ImageNet mean/std (RGB); the pipeline yields BGR, to_rgb flips it.
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True,
)

train_pipeline = [
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
