# UperNet on a linear ViT-B/16 (DeiT-B shapes) for 512 x 512 crops: blocks
# 4/6/8/12 (out_indices 3, 5, 7, 11) as 1/16 maps, resized by MultiLevelNeck
# to strides 4/8/16/32, as in MMSegmentation's ViT and MAE UperNet models.
# GLA by default; the experiment config sets the operator and the
# backbone's initialisation.
_base_ = ['mmseg::_base_/models/upernet_vit-b16_ln_mln.py']

model = dict(
    pretrained=None,
    data_preprocessor=dict(size=(512, 512)),
    backbone=dict(
        _delete_=True,
        type='mmpretrain.LinearVisionTransformer',
        arch='b',
        img_size=(512, 512),
        patch_size=16,
        out_indices=(3, 5, 7, 11),
        out_type='featmap',
        drop_path_rate=0.1,
        attn_cfg=dict(type='GatedLinearAttention')),
    decode_head=dict(num_classes=150, channels=768),
    auxiliary_head=dict(num_classes=150),
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))
