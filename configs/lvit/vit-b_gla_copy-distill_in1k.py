# The flagship: "copy the same, distill the difference". ViT-B (DeiT-B shape)
# student with bidirectional gated linear attention (GLA); its MLPs are
# copied from a softmax DeiT-B checkpoint (MLPCopy) and every block's
# attention output is distilled (MSE, lambda 50) from the frozen DeiT-B
# teacher, with the paper's ImageNet-1K recipe (300 epochs, total batch
# 4096).
# Set the softmax checkpoint (mmpretrain, timm .pth/.safetensors, official
# DeiT release, ...): --cfg-options model.teacher_checkpoint=PATH
# The operator is GLA, the student's default: nothing to set.
_base_ = ['../_base_/lvit/vit-b_distill_in1k.py']

custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
