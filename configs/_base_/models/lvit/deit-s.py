# Linear DeiT-S student (224 px, patch 16): DeiT-S's shapes and
# state-dict names with a pluggable attention operator. The experiment config
# sets model.backbone.attn_cfg (GatedLinearAttention here by default).
_base_ = ['../deit-s.py']

model = dict(
    backbone=dict(
        type='LinearVisionTransformer',
        attn_cfg=dict(type='GatedLinearAttention')))
