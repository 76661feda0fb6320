# The flagship: "copy the same, distill the difference". ViT-B (DeiT-B shape)
# student with bidirectional gated linear attention (GLA); its MLPs are
# copied from a softmax DeiT-B checkpoint (MLPCopy) and every block's
# attention output is distilled (MSE, lambda 50) from the frozen DeiT-B
# teacher, with the paper's ImageNet-1K recipe (300 epochs, total batch
# 4096).
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
            attn_cfg=dict(type='GatedLinearAttention'))),
    teacher_checkpoint=None)
custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
