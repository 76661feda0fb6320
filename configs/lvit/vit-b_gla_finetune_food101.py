# Downstream fine-tuning of a trained ViT-B (DeiT-B shape) GLA student on
# Food-101: the student's backbone comes from its checkpoint through
# init_cfg Pretrained (by default the flagship run's final checkpoint); the
# 101-class head is new. The paper's transfer recipe, no distillation.
# Another student: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/lvit/vit-b_gla_finetune.py',
    '../_base_/datasets/food101_lvit.py',
    '../_base_/schedules/lvit_transfer-300e.py',
]

model = dict(head=dict(num_classes=101))
