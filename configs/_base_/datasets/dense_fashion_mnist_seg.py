# Dense Fashion-MNIST for MMSegmentation: 128x128 grey canvases of 2-5
# occluding Fashion-MNIST items, 11 classes (0 background, 1..10 the items).
# Data (docs/dense_data.md): `python tools/data/prepare_fashion_mnist.py`
# then `python tools/data/prepare_dense_fashion_mnist.py` (writes data_root).
# Canvases are at the training size already: no resize or crop.
# Inputs have one channel; statistics of the default train set: mean 32.36,
# std 68.05 (for the model's SegDataPreProcessor, with bgr_to_rgb=False).
dataset_type = 'BaseSegDataset'
data_root = 'data/dense_fashion_mnist'
metainfo = dict(
    classes=('background', 'T-shirt/top', 'Trouser', 'Pullover', 'Dress',
             'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'),
    palette=[[0, 0, 0], [230, 25, 75], [60, 180, 75], [255, 225, 25],
             [0, 130, 200], [245, 130, 48], [145, 30, 180], [70, 240, 240],
             [240, 50, 230], [210, 245, 60], [250, 190, 212]])

train_pipeline = [
    dict(type='LoadImageFromFile', color_type='grayscale'),
    dict(type='LoadAnnotations'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile', color_type='grayscale'),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]

# No worker processes: on a 2-core machine they would take cores from the
# model. persistent_workers is stated because launchers other than ours
# default it to True, which torch refuses without workers.
train_dataloader = dict(
    batch_size=8,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        metainfo=metainfo,
        img_suffix='.png',
        seg_map_suffix='.png',
        reduce_zero_label=False,
        data_prefix=dict(img_path='images/train', seg_map_path='masks/train'),
        pipeline=train_pipeline))
# The test split: the training loader in order, through the test pipeline.
val_dataloader = dict(
    train_dataloader,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        train_dataloader['dataset'],
        data_prefix=dict(img_path='images/test', seg_map_path='masks/test'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader

val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
