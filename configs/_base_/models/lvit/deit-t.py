# Linear DeiT-T student (224 px, patch 16): DeiT-T's shapes and
# state-dict names with a pluggable attention operator. The experiment config
# sets model.backbone.attn_cfg (GatedLinearAttention here by default).
_base_ = ['../deit-t.py']

model = dict(
    backbone=dict(
        type='LinearVisionTransformer',
        attn_cfg=dict(type='GatedLinearAttention')))
