# Linear student of the small-scale experiments: the tiny softmax ViT's
# shapes (embed 96, depth 6, 4 heads, patch 4 on 32 px grey images) with a
# pluggable attention operator (GatedLinearAttention by default).
_base_ = ['../vit-tiny-p4_32px.py']

model = dict(
    backbone=dict(
        type='LinearVisionTransformer',
        attn_cfg=dict(type='GatedLinearAttention')))
