# SigLIP-B/16 (224 px; timm's vit_base_patch16_siglip_224) -> GLA on
# ImageNet-1K: a ViT-B student with bidirectional gated linear attention and
# SigLIP's token layout (no class token; every token after the final norm
# pooled by the attention-pooling neck, MAP), its MLPs and pooling neck
# copied from the SigLIP image tower (MLPCopy), every block's attention
# output distilled (MSE, lambda 50) from that frozen tower, a linear
# classifier on the pooled feature, with the paper's ImageNet-1K recipe
# (300 epochs, total batch 4096). Inputs are normalised as SigLIP's were
# (mean 0.5, std 0.5).
# Set the SigLIP checkpoint (timm .safetensors/.pth; read as 'siglip'):
# --cfg-options model.teacher_checkpoint=PATH
_base_ = ['../_base_/lvit/vit-b_distill_in1k.py']

model = dict(
    student=dict(
        backbone=dict(with_cls_token=False, out_type='raw'),
        neck=dict(
            _delete_=True,  # the bases have none
            type='AttentionPoolingNeck',
            in_channels=768,
            num_heads=12,
            feedforward_channels=3072),
        head=dict(type='LinearClsHead')),
    # SigLIP's tower is the softmax LinearVisionTransformer of that layout
    # with the same neck; it has no classifier, and distillation reads its
    # blocks only.
    teacher=dict(
        backbone=dict(
            type='LinearVisionTransformer',
            with_cls_token=False,
            out_type='raw',
            attn_cfg=dict(type='SoftmaxAttention')),
        neck=dict(
            _delete_=True,  # the bases have none
            type='AttentionPoolingNeck',
            in_channels=768,
            num_heads=12,
            feedforward_channels=3072),
        head=None))
data_preprocessor = dict(mean=[127.5, 127.5, 127.5], std=[127.5, 127.5, 127.5])
custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
