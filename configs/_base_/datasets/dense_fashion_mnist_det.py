# Dense Fashion-MNIST for MMDetection (boxes and instance masks): 128x128
# grey canvases of 2-5 occluding Fashion-MNIST items, 10 classes, COCO
# annotations of the visible part of each item (compressed RLE masks).
# Data (docs/dense_data.md): `python tools/data/prepare_fashion_mnist.py`
# then `python tools/data/prepare_dense_fashion_mnist.py` (writes data_root).
# Moving data_root with --cfg-options also takes val_evaluator.ann_file and
# test_evaluator.ann_file, which are full paths.
# Inputs have one channel; statistics of the default train set: mean 32.36,
# std 68.05 (for the model's DetDataPreProcessor, with bgr_to_rgb=False).
dataset_type = 'CocoDataset'
data_root = 'data/dense_fashion_mnist/'
metainfo = dict(
    classes=('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal',
             'Shirt', 'Sneaker', 'Bag', 'Ankle boot'),
    palette=[(230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200),
             (245, 130, 48), (145, 30, 180), (70, 240, 240), (240, 50, 230),
             (210, 245, 60), (250, 190, 212)])

train_pipeline = [
    dict(type='LoadImageFromFile', color_type='grayscale'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
# Canvases are at the model's size already; the identity Resize records the
# scale_factor (1.0) that the heads read to map predictions back.
test_pipeline = [
    dict(type='LoadImageFromFile', color_type='grayscale'),
    dict(type='Resize', scale_factor=1.0, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(
        type='PackDetInputs',
        meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                   'scale_factor')),
]

# Both splits: batches of 8 without worker processes (on a 2-core machine
# they would take cores from the model; persistent_workers is stated because
# launchers other than ours default it to True, which torch refuses without
# workers), the same dataset class and classes.
__loader = dict(batch_size=8, num_workers=0, persistent_workers=False)
__dataset = dict(type=dataset_type, data_root=data_root, metainfo=metainfo)
train_dataloader = dict(
    __loader,
    sampler=dict(type='DefaultSampler', shuffle=True),
    batch_sampler=dict(type='AspectRatioBatchSampler'),
    dataset=dict(
        __dataset,
        ann_file='annotations/instances_train.json',
        data_prefix=dict(img='images/train/'),
        filter_cfg=dict(filter_empty_gt=True, min_size=32),
        pipeline=train_pipeline))
val_dataloader = dict(
    __loader,
    drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        __dataset,
        ann_file='annotations/instances_test.json',
        data_prefix=dict(img='images/test/'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader

val_evaluator = dict(
    type='CocoMetric',
    ann_file=data_root + 'annotations/instances_test.json',
    metric=['bbox', 'segm'],
    format_only=False)
test_evaluator = val_evaluator
