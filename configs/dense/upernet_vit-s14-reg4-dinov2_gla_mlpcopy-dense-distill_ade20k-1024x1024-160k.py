# DINOv2 to linear attention in the dense run itself: UperNet on ADE20K at
# 1024 x 1024 (160k iterations), whose GLA ViT-S/14 backbone (DINOv2's
# structure: 4 registers, layer scale) starts from DINOv2-S/14-reg4 with
# MLPCopy while every block's attention output is distilled (MSE, lambda
# 50) from the frozen softmax DINOv2 backbone (no neck or heads); 74 x 74
# patches, where linear attention pays. Checkpoints hold the segmentor
# alone. Set the softmax checkpoint (timm's vit_small_patch14_reg4_dinov2;
# its 518 px position table is resampled to 1024 px with timm's
# resample_abs_pos_embed as it is read):
#   --cfg-options model.teacher_checkpoint=PATH
_base_ = [
    '../_base_/models/dense/upernet_lvit-s14-reg4-dinov2.py',
    '../_base_/dense/upernet_ade20k-512x512-160k.py',
]

crop_size = (1024, 1024)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(4096, 1024), ratio_range=(0.5, 2.0),
         keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(4096, 1024), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

model = dict(
    _delete_=True,
    type='mmpretrain.DenseAttentionDistiller',
    student=_base_.model,
    teacher=dict(
        type='LinearVisionTransformer',
        arch='deit-small',
        img_size=1024,
        patch_size=14,
        layer_scale_init_value=1e-5,
        num_register_tokens=4,
        attn_cfg=dict(type='SoftmaxAttention')),
    teacher_checkpoint='checkpoints/vit_small_patch14_reg4_dinov2.safetensors',
    distill_losses=[dict(type='AttentionOutputMSE', loss_weight=50.)])
custom_hooks = [
    dict(type='mmpretrain.SoftmaxToLinearInitHook', setting='MLPCopy',
         checkpoint=None),
]
