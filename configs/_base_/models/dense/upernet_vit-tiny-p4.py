# A small UperNet for Dense Fashion-MNIST (128 px grey canvases, 11 classes):
# the tiny ViT of the small-scale experiments (embed 64, depth 4, 4 heads,
# 4-px patches, as checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth) gives
# its four blocks' 32 x 32 maps; MultiLevelNeck resizes them to strides
# 2/4/8/16 for a 64-channel UPerHead. Pixels are normalised with the
# statistics the classifier was trained with, so copied weights see the
# inputs they know. GLA by default; the recipe:
# ../../dense/upernet_vit-tiny-p4_dense-fmnist.py.
model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(
        type='SegDataPreProcessor',
        mean=[72.94],
        std=[90.02],
        bgr_to_rgb=False,
        pad_val=0,
        seg_pad_val=255,
        size=(128, 128)),
    backbone=dict(
        type='mmpretrain.LinearVisionTransformer',
        arch=dict(embed_dims=64, num_layers=4, num_heads=4,
                  feedforward_channels=256),
        img_size=128,
        patch_size=4,
        in_channels=1,
        out_indices=(0, 1, 2, 3),
        out_type='featmap',
        attn_cfg=dict(type='GatedLinearAttention')),
    neck=dict(
        type='MultiLevelNeck',
        in_channels=[64, 64, 64, 64],
        out_channels=64,
        scales=[2, 1, 0.5, 0.25]),
    decode_head=dict(
        type='UPerHead',
        in_channels=[64, 64, 64, 64],
        in_index=[0, 1, 2, 3],
        pool_scales=(1, 2, 3, 6),
        channels=64,
        dropout_ratio=0.1,
        num_classes=11,
        norm_cfg=dict(type='BN', requires_grad=True),
        align_corners=False,
        loss_decode=dict(
            type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
