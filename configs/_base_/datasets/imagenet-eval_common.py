# The evaluation half of the paper's 224 px ImageNet-1K recipe, shared by the
# ImageNet-1K config (imagenet_bs64_lvit.py) and the out-of-distribution test
# sets (imagenet-{a,r,sketch,v2}_lvit.py): ImageNet normalisation over the
# 1000 classes, the test pipeline, a test loader without its dataset's type
# and root, and top-1/top-5 accuracy. Not a dataset config by itself: the
# configs that inherit it name the dataset.
data_preprocessor = dict(
    num_classes=1000,
    # ImageNet mean/std (RGB); the pipeline yields BGR, to_rgb flips it.
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True,
)

# Center crop 0.9: shorter side to 224 / 0.9 = 249, then the central 224.
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=249, edge='short', backend='pillow',
         interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]

test_dataloader = dict(
    batch_size=128,
    num_workers=8,
    dataset=dict(pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
test_evaluator = dict(type='Accuracy', topk=(1, 5))
