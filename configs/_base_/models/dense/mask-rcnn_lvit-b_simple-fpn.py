# Mask R-CNN on a linear ViT-B/16 (DeiT-B shapes) with a ViTDet-style simple
# feature pyramid (Li et al. 2022, arXiv:2203.16527): the last block's 1/16
# map -> strides 4/8/16/32 (+ 64 for the RPN). GLA by default; the
# experiment config sets the operator and the backbone's initialisation.
_base_ = ['mmdet::_base_/models/mask-rcnn_r50_fpn.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmpretrain.LinearVisionTransformer',
        arch='b',
        img_size=1024,
        patch_size=16,
        out_type='featmap',
        drop_path_rate=0.1,
        attn_cfg=dict(type='GatedLinearAttention')),
    neck=dict(
        _delete_=True,
        type='mmpretrain.SimpleFPN',
        in_channels=768,
        out_channels=256,
        num_outs=5))
