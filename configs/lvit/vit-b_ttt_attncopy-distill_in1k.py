# ViT-B (DeiT-B shape) student with TTT (ViT^3 test-time-training block),
# Copy (attention q, k, v, proj copied), + attention-output distillation
# (lambda 50) from the frozen softmax teacher, on ImageNet-1K with the
# paper's recipe.
# Set the softmax checkpoint (mmpretrain, timm .pth/.safetensors, official
# DeiT release, ...): --cfg-options model.teacher_checkpoint=PATH
_base_ = [
    '../_base_/models/lvit/deit-b_distill.py',
    '../_base_/datasets/imagenet_bs64_lvit.py',
    '../_base_/schedules/lvit_in1k.py',
    '../_base_/default_runtime.py',
]

model = dict(
    student=dict(
        backbone=dict(
            attn_cfg=dict(type='TTTAttention'),
            with_cls_token=False,
            out_type='avg_featmap',
            pos_embed_type='sincos')),
    teacher_checkpoint=None)
custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='Copy')]
