# Linear student of the small-scale experiments: the tiny softmax ViT's
# shapes (embed 64, depth 4, 4 heads, patch 4 on 28 px grey images) with a
# pluggable attention operator (GatedLinearAttention by default).
_base_ = ['../vit-tiny-p4_28px.py']

model = dict(
    backbone=dict(
        type='LinearVisionTransformer',
        attn_cfg=dict(type='GatedLinearAttention', chunk_size=16)))
