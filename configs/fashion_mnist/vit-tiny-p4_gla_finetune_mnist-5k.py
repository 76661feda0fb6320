# Downstream fine-tuning of a trained tiny GLA student on MNIST-5k (4,000
# train / 1,000 test digits): the backbone comes from the student's
# checkpoint through init_cfg Pretrained (by default the final checkpoint of
# vit-tiny-p4_gla_copy-distill_fashion-mnist-5k.py, which holds the student
# alone); the 10-class head starts fresh. No distillation; the small-scale
# schedule (10 epochs).
# Another student: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/models/lvit/vit-tiny-p4_28px.py',
    '../_base_/datasets/mnist5k_bs64.py',
    '../_base_/schedules/small_adamw.py',
    '../_base_/default_runtime.py',
]

model = dict(
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            checkpoint='work_dirs/vit-tiny-p4_gla_copy-distill_fashion-mnist'
            '-5k/epoch_10.pth',
            prefix='backbone.')))
