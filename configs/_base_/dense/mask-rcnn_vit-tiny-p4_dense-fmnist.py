# A small Mask R-CNN on Dense Fashion-MNIST (128 px grey canvases, 10
# classes, COCO boxes + masks): the tiny ViT of the small-scale experiments
# (embed 64, depth 4, 4 heads, 4-px patches, as
# checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth) gives its last block's
# stride-4 map; SimpleFPN keeps it (x1), halves it (x0.5) and pools further
# to strides 16/32/64 for 64-channel RPN and RoI heads. Pixels are
# normalised with the statistics the classifier was trained with.
# Schedule: ../schedules/dense_fmnist_8e.py.
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    '../datasets/dense_fashion_mnist_det.py',
    'mmdet::_base_/default_runtime.py',
    '../schedules/dense_fmnist_8e.py',
]

model = dict(
    data_preprocessor=dict(mean=[72.94], std=[90.02], bgr_to_rgb=False),
    backbone=dict(
        _delete_=True,
        type='mmpretrain.LinearVisionTransformer',
        arch=dict(embed_dims=64, num_layers=4, num_heads=4,
                  feedforward_channels=256),
        img_size=128,
        patch_size=4,
        in_channels=1,
        out_type='featmap',
        attn_cfg=dict(type='GatedLinearAttention')),
    neck=dict(
        _delete_=True,
        type='mmpretrain.SimpleFPN',
        in_channels=64,
        out_channels=64,
        scale_factors=(1.0, 0.5),
        num_outs=5),
    rpn_head=dict(in_channels=64, feat_channels=64),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=64),
        bbox_head=dict(in_channels=64, fc_out_channels=256, num_classes=10),
        mask_roi_extractor=dict(out_channels=64),
        mask_head=dict(in_channels=64, conv_out_channels=64,
                       num_classes=10)),
    train_cfg=dict(rcnn=dict(sampler=dict(num=128))))

custom_imports = dict(imports=['mmlvit'], allow_failed_imports=False)
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(type='mmpretrain.SafeCheckpointHook', interval=2,
                    max_keep_ckpts=1, save_best='coco/segm_mAP',
                    rule='greater'),
    random_state=dict(type='mmpretrain.RandomStateHook'),
    strict_load=dict(type='mmpretrain.StrictLoadHook'),
)
randomness = dict(seed=0)
