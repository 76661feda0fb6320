# UperNet on a linear ViT-S/14 with DINOv2's structure (4 registers, arXiv
# 2309.16588; layer scale; GELU, LN eps 1e-6) for 1024 x 1024 crops: blocks
# 4/6/8/12 (out_indices 3, 5, 7, 11) as 1/14 maps (74 x 74: the patch
# embedding pads 1024 to 1036), resized by MultiLevelNeck to four strides,
# as in the ViT-B model (upernet_lvit-b.py). GLA by default; the experiment
# config sets the operator and the backbone's initialisation.
_base_ = ['mmseg::_base_/models/upernet_vit-b16_ln_mln.py']

model = dict(
    pretrained=None,
    data_preprocessor=dict(size=(1024, 1024)),
    backbone=dict(
        _delete_=True,
        type='mmpretrain.LinearVisionTransformer',
        arch='deit-small',
        img_size=(1024, 1024),
        patch_size=14,
        layer_scale_init_value=1e-5,
        num_register_tokens=4,
        out_indices=(3, 5, 7, 11),
        out_type='featmap',
        drop_path_rate=0.1,
        attn_cfg=dict(type='GatedLinearAttention')),
    neck=dict(in_channels=[384, 384, 384, 384], out_channels=384),
    decode_head=dict(
        in_channels=[384, 384, 384, 384], channels=384, num_classes=150),
    auxiliary_head=dict(in_channels=384, num_classes=150),
    test_cfg=dict(mode='slide', crop_size=(1024, 1024), stride=(683, 683)))
