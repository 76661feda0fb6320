# Softmax DeiT-T classifier (224 px, patch 16): the teacher and the
# "Softmax" reference of the paper. DeiT-B's classifier (deit-b.py) at
# DeiT-T width; drop path 0.0 as in the recipe.
_base_ = ['./deit-b.py']

model = dict(
    backbone=dict(arch='deit-tiny', drop_path_rate=0.0),
    head=dict(in_channels=192))
