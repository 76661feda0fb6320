# DeiT-S student with bidirectional gated linear attention (GLA), MLPCopy
# (MLPs copied), + attention-output distillation (lambda 50) from the frozen
# softmax teacher, on Flowers-102 with the paper's recipe.
# Set the softmax checkpoint (mmpretrain, timm .pth/.safetensors, official
# DeiT release, ...): --cfg-options model.teacher_checkpoint=PATH
# The operator is GLA, the student's default.
_base_ = ['../_base_/lvit/deit-s_mlpcopy-distill-600e.py',
          '../_base_/datasets/flowers102_lvit.py']

model = dict(student=dict(head=dict(num_classes=102)))
