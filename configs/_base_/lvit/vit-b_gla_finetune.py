# Downstream fine-tuning of a trained ViT-B (DeiT-B shape) GLA student
# (configs/lvit/vit-b_gla_finetune_{dataset}.py): the student's backbone comes
# from its checkpoint through init_cfg Pretrained (by default the flagship
# run's final checkpoint); the head is new. No distillation. A leaf config
# adds the dataset, its transfer schedule and the head's classes.
_base_ = ['../models/lvit/deit-b.py', '../default_runtime.py']

model = dict(
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            checkpoint='work_dirs/vit-b_gla_copy-distill_in1k/epoch_300.pth',
            prefix='backbone.')))
