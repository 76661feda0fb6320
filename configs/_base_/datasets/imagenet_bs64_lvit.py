# ImageNet-1K (1000 classes; 1,281,167 train / 50,000 val images) with the
# paper's recipe at 224 px (mmpretrain's ImageNet class).
# data_root = data/imagenet, either layout of mmpretrain's ImageNet:
#   data/imagenet/train/n01440764/*.JPEG ...   (1000 wnid folders)
#   data/imagenet/val/n01440764/*.JPEG ...     (val sorted into wnid folders)
# or flat train/ and val/ image folders plus meta/train.txt and meta/val.txt
# ("relative/path.JPEG label" lines).
# Batch: 64 per GPU x 64 GPUs = 4096 in total (the paper's batch); the
# schedule's auto_scale_lr scales the lr to GPUs x batch_size.
# Normalisation, test pipeline, evaluation loader and metric:
# imagenet-eval_common.py.
_base_ = ['./imagenet-eval_common.py']

dataset_type = 'ImageNet'
data_root = 'data/imagenet'

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
# Validation and test: the evaluation loader on the val split.
val_dataloader = dict(
    _base_.test_dataloader,
    dataset=dict(
        _base_.test_dataloader.dataset,
        type=dataset_type,
        data_root=data_root,
        split='val',
        test_mode=True,
    ),
)
val_evaluator = _base_.test_evaluator
test_dataloader = val_dataloader
