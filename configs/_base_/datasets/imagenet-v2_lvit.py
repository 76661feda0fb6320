# ImageNet-V2 matched-frequency (10,000 images of all 1000 ImageNet classes).
# data_root = data/imagenetv2, the extracted
# imagenetv2-matched-frequency.tar.gz; its folders are class indices:
#   data/imagenetv2/imagenetv2-matched-frequency-format-val/0/*.jpeg ...
#   ... /999/
# Test only (data_preprocessor, test_dataloader, test_evaluator) for a model
# trained on ImageNet-1K: labels are ImageNet-1K class indices. Combine it
# with a model config and default_runtime.py, plus test_cfg = dict(), as in
# docs/datasets.md ("Out-of-distribution evaluation").
data_preprocessor = dict(
    num_classes=1000,
    # ImageNet mean/std (RGB); the pipeline yields BGR, to_rgb flips it.
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True,
)

# Center crop 0.9, as for ImageNet-1K: shorter side 249, then the central 224.
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

test_dataloader = dict(
    batch_size=128,
    num_workers=8,
    dataset=dict(
        type='ImageNetV2',
        data_root='data/imagenetv2',
        data_prefix='imagenetv2-matched-frequency-format-val',
        pipeline=test_pipeline,
    ),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
test_evaluator = dict(type='Accuracy', topk=(1, 5))
