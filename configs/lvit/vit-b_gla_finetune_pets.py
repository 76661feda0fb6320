# Downstream fine-tuning of a trained ViT-B (DeiT-B shape) GLA student on
# Oxford-IIIT Pets: the student's backbone comes from its checkpoint through
# init_cfg Pretrained (by default the flagship run's final checkpoint); the
# 37-class head is new. The paper's transfer recipe, no distillation.
# Another student: --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/models/lvit/deit-b.py',
    '../_base_/datasets/pets_lvit.py',
    '../_base_/schedules/lvit_transfer-600e.py',
    '../_base_/default_runtime.py',
]

model = dict(
    backbone=dict(
        attn_cfg=dict(type='GatedLinearAttention'),
        init_cfg=dict(
            type='Pretrained',
            checkpoint='work_dirs/vit-b_gla_copy-distill_in1k/epoch_300.pth',
            prefix='backbone.')),
    head=dict(num_classes=37))
