# DINOv2 to linear attention: a ViT-S/14 student with DINOv2's structure
# (4 registers, arXiv 2309.16588; layer scale; GELU, LN eps 1e-6) and
# bidirectional gated linear attention (GLA); its MLPs and layer scales are
# copied from DINOv2-S/14-reg4 (MLPCopy) and every block's attention output
# is distilled (MSE, lambda 50) from that frozen softmax model, with the
# paper's ImageNet-1K recipe at 224 px (16 x 16 patches; 300 epochs, total
# batch 4096). The teacher is LinearVisionTransformer with softmax
# attention, which computes DINOv2's function; the release has no
# classifier, so the teacher has none and the student's head starts fresh.
# Set the softmax checkpoint (timm's vit_small_patch14_reg4_dinov2,
# .safetensors or .pth; its 518 px position table is resampled to 224 px
# with timm's resample_abs_pos_embed as it is read):
#   --cfg-options model.teacher_checkpoint=PATH
_base_ = ['../_base_/lvit/vit-b_distill_in1k.py']

model = dict(
    student=dict(
        backbone=dict(
            arch='deit-small',
            patch_size=14,
            layer_scale_init_value=1e-5,
            num_register_tokens=4),
        head=dict(in_channels=384)),
    # DINOv2-S/14-reg4 itself: the student's shape and structure.
    teacher=dict(
        backbone=dict(
            type='LinearVisionTransformer',
            arch='deit-small',
            patch_size=14,
            layer_scale_init_value=1e-5,
            num_register_tokens=4,
            attn_cfg=dict(type='SoftmaxAttention')),
        head=None))

custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
