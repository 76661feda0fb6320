# The paper's ADE20K row (ReLU-B, FullCopy w/ distill): UperNet, 512 x 512,
# 160k iterations, on the ReLU linear ViT-B converted on ImageNet-1K (FullCopy
# + attention distillation). Paper: 45.3 mIoU (softmax 46.1). The backbone is
# the ImageNet-1K student of configs/lvit/vit-b_relu_fullcopy-distill_in1k.py
# as its run saved it (an ordinary classifier checkpoint; position embeddings
# are resized to the 32 x 32 grid); neck and heads start fresh. Another file:
#   --cfg-options model.backbone.init_cfg.checkpoint=PATH
_base_ = [
    '../_base_/models/dense/upernet_lvit-b.py',
    '../_base_/dense/upernet_ade20k-512x512-160k.py',
]

model = dict(
    backbone=dict(
        attn_cfg=dict(type='ReLULinearAttention'),
        init_cfg=dict(
            type='Pretrained',
            checkpoint='work_dirs/vit-b_relu_fullcopy-distill_in1k/epoch_300.pth',
            prefix='backbone.')))
