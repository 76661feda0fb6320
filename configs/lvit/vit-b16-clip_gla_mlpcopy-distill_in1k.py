# The flagship recipe (GLA student, MLPCopy + attention-output distillation,
# the paper's ImageNet-1K schedule) from a CLIP ViT-B/16 image tower
# (arXiv:2103.00020): pre-norm, QuickGELU, LayerNorm eps 1e-5 and no patch
# bias on student and teacher, CLIP's input normalisation. The teacher is
# the CLIP tower as LinearVisionTransformer with SoftmaxAttention (the same
# function, docs/families.md) without a head: the tower's projection is
# skipped, the student gets a new 1000-class head.
# Set the CLIP checkpoint (timm's vit_base_patch16_clip_224.openai, or
# OpenAI's / OpenCLIP's file): --cfg-options model.teacher_checkpoint=PATH
_base_ = ['../_base_/lvit/vit-b_distill_in1k.py']

# The CLIP tower's structure (a name with two leading underscores is not a
# key of the resolved config).
__clip = dict(
    arch='base',
    img_size=224,
    patch_size=16,
    pre_norm=True,
    norm_cfg=dict(type='LN', eps=1e-5),
    patch_cfg=dict(bias=False),
    layer_cfgs=dict(act_cfg=dict(type='QuickGELU')))
model = dict(
    student=dict(backbone=__clip),
    teacher=dict(
        backbone=dict(
            __clip,
            _delete_=True,
            type='LinearVisionTransformer',
            attn_cfg=dict(type='SoftmaxAttention')),
        head=None))
# CLIP's mean and std (RGB, 0-255).
data_preprocessor = dict(
    mean=[122.771, 116.746, 104.094], std=[68.501, 66.632, 70.323])
custom_hooks = [dict(type='SoftmaxToLinearInitHook', setting='MLPCopy')]
