"""The ViT families of the family tests: timm's own models at tiny sizes
(perturbed random weights), their files in the real key layouts, and the
classifiers LinearVisionTransformer builds for them."""

import functools

import torch
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from tiny_vit import TIMM_FAMILY_TINY, perturbed_timm_model

import mmlvit  # noqa: F401
from mmlvit.transfer import infer_vit_arch, load_softmax_checkpoint
from mmlvit.utils.logs import INIT_DUMP, drop_messages

# family (the reader's format name) -> timm model name.
TIMM_NAMES = {
    'deit3': 'deit3_small_patch16_224',
    'deit-distilled': 'deit_tiny_distilled_patch16_224',
    'clip': 'vit_base_patch16_clip_quickgelu_224',
    # EVA-02: packed SwiGLU and q/v biases (tiny, small), or q/k/v
    # projections and a SwiGLU with its hidden norm (base, large).
    'eva02': 'eva02_tiny_patch14_224',
    'eva02-base': 'eva02_base_patch14_224',
    'dinov2': 'vit_small_patch14_reg4_dinov2',
    'siglip': 'vit_base_patch16_siglip_224',
    'siglip-gap': 'vit_base_patch16_siglip_gap_224',
    # DINOv3 (timm's Eva): no qkv bias, q/v biases, a SwiGLU MLP (H+).
    'dinov3': 'vit_small_patch16_dinov3',
    'dinov3-qkvb': 'vit_small_patch16_dinov3_qkvb',
    'dinov3-swiglu': 'vit_huge_plus_patch16_dinov3',
}
# DINOv3 pooled by its class token like Meta's model (timm's default
# pools the patch tokens: pass global_pool='avg' for that).
TIMM_OPTIONS = {
    name: dict(global_pool='token')
    for name in ('dinov3', 'dinov3-qkvb', 'dinov3-swiglu')
}
# Sizes other than TIMM_FAMILY_TINY's: EVA-02's patch 14 on 56 px, any
# image size at run time (its RoPE and positions follow the grid).
TIMM_SIZES = {
    name: dict(img_size=56, patch_size=14, dynamic_img_size=True)
    for name in ('eva02', 'eva02-base')
}
# DINOv2's layouts at patch 14 (the giant's packed SwiGLU MLP with a hidden
# width of 128 at width 64), built at 56 px (4x4 patches).
DINOV2_NAMES = {
    'reg4': 'vit_small_patch14_reg4_dinov2',
    'plain': 'vit_small_patch14_dinov2',
    'giant-swiglu': 'vit_giant_patch14_reg4_dinov2',
}
DINOV2_TINY = dict(TIMM_FAMILY_TINY, img_size=56, patch_size=14)
# Two images of the tiny models' size.
IMAGES = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))


@functools.cache
def timm_model(family, **kwargs):
    """timm's model of ``family`` (tiny, perturbed, eval mode; ``kwargs``
    go to ``timm.create_model``, e.g. ``act_layer='gelu_tanh'``)."""
    sizes = TIMM_FAMILY_TINY | TIMM_SIZES.get(family, {})
    sizes |= TIMM_OPTIONS.get(family, {})
    model = perturbed_timm_model(TIMM_NAMES[family], **(sizes | kwargs))
    if getattr(model, 'attn_pool', None) is not None:
        # Shifted by U(0, 1), the pool's layers would blow its output up
        # to ~1e3, where fp32 rounding alone exceeds the oracle's 1e-5:
        # centred and scaled by fan-in, it stays O(1) and still far from
        # a fresh init.
        with torch.no_grad():
            for layer in model.attn_pool.modules():
                if isinstance(layer, torch.nn.Linear):
                    layer.weight.sub_(0.5).mul_(layer.in_features**-0.5)
    return model


def images(family, size=None, seed=3):
    """Two images of the family's tiny size (or ``size``)."""
    if size is None and family not in TIMM_SIZES:
        return IMAGES
    size = size or TIMM_SIZES[family]['img_size']
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, size, size, generator=generator)


def openai_layout(state):
    """A timm CLIP state dict in OpenAI's / OpenCLIP's layout (the image
    tower under ``visual.``, with a stand-in text tower), by the known
    key correspondence; ``head.bias`` has no place there (CLIP's
    projection has none)."""
    visual = {
        'conv1.weight': state['patch_embed.proj.weight'],
        'class_embedding': state['cls_token'].reshape(-1),
        'positional_embedding': state['pos_embed'][0],
        'ln_pre.weight': state['norm_pre.weight'],
        'ln_pre.bias': state['norm_pre.bias'],
        'ln_post.weight': state['norm.weight'],
        'ln_post.bias': state['norm.bias'],
        'proj': state['head.weight'].t().contiguous(),
    }
    names = dict(
        norm1='ln_1',
        norm2='ln_2',
        **{'mlp.fc1': 'mlp.c_fc', 'mlp.fc2': 'mlp.c_proj'},
        **{'attn.proj': 'attn.out_proj'},
    )
    for key, value in state.items():
        if not key.startswith('blocks.'):
            continue
        _, index, rest = key.split('.', 2)
        module, kind = rest.rsplit('.', 1)
        if module == 'attn.qkv':
            rest = f'attn.in_proj_{kind}'
        else:
            rest = f'{names[module]}.{kind}'
        visual[f'transformer.resblocks.{index}.{rest}'] = value
    text = {
        'token_embedding.weight': torch.zeros(50, 32),
        'positional_embedding': torch.zeros(7, 32),
        'transformer.resblocks.0.attn.in_proj_weight': torch.zeros(96, 32),
        'ln_final.weight': torch.ones(32),
        'text_projection': torch.zeros(32, 10),
        'logit_scale': torch.tensor(4.6),
    }
    return {**{f'visual.{k}': v for k, v in visual.items()}, **text}


def official_deit3_layout(state):
    """A timm DeiT III state dict as the official release holds it: the
    layer scales named ``gamma_1``/``gamma_2``, everything under
    ``model``."""
    names = {'ls1.gamma': 'gamma_1', 'ls2.gamma': 'gamma_2'}
    renamed = {}
    for key, value in state.items():
        for timm_name, official in names.items():
            if key.endswith(timm_name):
                key = key[: -len(timm_name)] + official
        renamed[key] = value
    return {'model': renamed}


def meta_dinov3_layout(state, head_dims=32):
    """A timm DINOv3 state dict in Meta's layout: ``storage_tokens``,
    ``ls1.gamma``/``ls2.gamma``, one ``qkv.bias`` (zero without q/v biases)
    whose key part is junk that ``qkv.bias_mask`` zeroes, ``mlp.w1``/
    ``w2``/``w3`` for a SwiGLU, the RoPE periods in bfloat16 and the
    pre-training ``mask_token``."""
    names = {'gamma_1': 'ls1.gamma', 'gamma_2': 'ls2.gamma'}
    if any('.mlp.fc1_g.' in k for k in state):
        names |= {f'mlp.{a}.': f'mlp.{b}.' for a, b in _META_SWIGLU}
    meta = {}
    for key, value in state.items():
        if key.endswith(('attn.q_bias', 'attn.v_bias')):
            continue
        if key.endswith('attn.qkv.weight'):
            prefix, C = key.removesuffix('qkv.weight'), value.shape[1]
            q, v = (state.get(prefix + p, torch.zeros(C)) for p in _QV)
            meta[prefix + 'qkv.bias'] = torch.cat([q, torch.rand(C) + 1, v])
            mask = torch.ones(3 * C)
            mask[C : 2 * C] = 0
            meta[prefix + 'qkv.bias_mask'] = mask
        for timm_name, official in names.items():
            key = key.replace(timm_name, official)
        meta['storage_tokens' if key == 'reg_token' else key] = value
    bands = head_dims // 4
    periods = 100.0 ** (torch.arange(bands) / bands)
    meta['rope_embed.periods'] = periods.bfloat16().float()
    meta['mask_token'] = torch.zeros(1, state['cls_token'].shape[-1])
    return meta


_QV = ('q_bias', 'v_bias')
_META_SWIGLU = (('fc1_g', 'w1'), ('fc1_x', 'w2'), ('fc2', 'w3'))


@functools.cache
def dinov2_model(layout, dynamic_img_size=False):
    """timm's DINOv2 of ``layout`` (a key of DINOV2_NAMES) at DINOV2_TINY,
    perturbed, eval mode; ``dynamic_img_size``: resampling its table to
    the input's grid at run time."""
    extra = dict(mlp_ratio=4.0) if layout == 'giant-swiglu' else {}
    return perturbed_timm_model(
        DINOV2_NAMES[layout],
        dynamic_img_size=dynamic_img_size,
        **DINOV2_TINY,
        **extra,
    )


def save_family(family, path, layout='timm'):
    """Save ``family``'s timm model as its release would: timm's state
    dict, or CLIP's OpenAI layout (``layout='openai'``), or DeiT III's
    official one (``'official'``); returns path."""
    state = timm_model(family).state_dict()
    if layout == 'openai':
        state = openai_layout(state)
    elif layout == 'official':
        state = official_deit3_layout(state)
    torch.save(state, path)
    return path


def family_classifier(state, attn, seed=0, **backbone):
    """The ImageClassifier of a converted state dict's family (shape,
    layer scale, distillation token, pre-norm, pooling neck, head type read
    off the weights) with the operator ``attn``, after init_weights()."""
    init_default_scope('mmpretrain')
    arch = infer_vit_arch(state, num_heads=TIMM_FAMILY_TINY['num_heads'])
    cfg = dict(
        type='ImageClassifier',
        backbone=dict(
            type='LinearVisionTransformer',
            arch=arch.arch,
            img_size=arch.img_size,
            patch_size=arch.patch_size,
            attn_cfg=dict(type=attn),
            **(arch.backbone_options() | backbone),
        ),
        neck=arch.neck,
        head=dict(
            type=arch.head_type,
            num_classes=arch.num_classes,
            in_channels=arch.embed_dims,
        ),
    )
    torch.manual_seed(seed)
    model = MODELS.build(cfg)
    with drop_messages(INIT_DUMP):
        model.init_weights()
    return model, cfg


def read(path, format='auto', img_size=None):
    return load_softmax_checkpoint(path, format=format, img_size=img_size)
