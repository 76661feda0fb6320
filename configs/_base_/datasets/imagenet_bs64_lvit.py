# ImageNet-1K (1000 classes; 1,281,167 train / 50,000 val images) with the
# paper's recipe at 224 px (mmpretrain's ImageNet class): the data half of
# every 224 px config (the transfer datasets inherit it and name their own
# dataset).
# data_root = data/imagenet, either layout of mmpretrain's ImageNet:
#   data/imagenet/train/n01440764/*.JPEG ...   (1000 wnid folders)
#   data/imagenet/val/n01440764/*.JPEG ...     (val sorted into wnid folders)
# or flat train/ and val/ image folders plus meta/train.txt and meta/val.txt
# ("relative/path.JPEG label" lines).
# Batch: 64 per GPU x 64 GPUs = 4096 in total (the paper's batch); the
# schedule's auto_scale_lr scales the lr to GPUs x batch_size.
dataset_type = 'ImageNet'
data_root = 'data/imagenet'

data_preprocessor = dict(
    num_classes=1000,
    # ImageNet mean/std (RGB); the pipeline yields BGR, to_rgb flips it.
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True,
)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='ColorJitter', brightness=0.4, contrast=0.4, saturation=0.4),
    dict(type='PackInputs'),
]
# Center crop 0.9: shorter side to 224 / 0.9 = 249, then the central 224.
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=249, edge='short', backend='pillow',
         interpolation='bicubic'),
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
# Validation and test on the val split: the training loader in order, 128
# images a batch, through the test pipeline.
val_dataloader = dict(
    train_dataloader,
    batch_size=128,
    dataset=dict(train_dataloader['dataset'], split='val', test_mode=True,
                 pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
