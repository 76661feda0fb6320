"""Which ViT family a timm-layout state dict holds, read off its keys.

A family is a set of structural features beyond the plain ViT/DeiT of
arXiv:2010.11929 / 2012.12877, each visible in the keys:

- DeiT III (arXiv:2204.07118): a layer scale on both residual branches of
  every block (``blocks.N.ls1.gamma``, ``blocks.N.ls2.gamma``; the official
  release names them ``gamma_1``, ``gamma_2``);
- distilled DeiT (arXiv:2012.12877): a distillation token (``dist_token``)
  after the class token and a second classifier (``head_dist``);
- CLIP (arXiv:2103.00020): a LayerNorm before the blocks (``norm_pre``) and
  a patch embedding without bias;
- EVA-02 (arXiv:2303.11331): split q/v biases (``attn.q_bias``,
  ``attn.v_bias``) or separate ``attn.q_proj/k_proj/v_proj``, a SwiGLU MLP
  (packed ``mlp.fc1`` of twice the hidden width, or ``mlp.fc1_g``,
  ``mlp.fc1_x`` and a hidden ``mlp.norm``) and rotary positions (no
  weights), see :mod:`.eva_blocks`;
- DINOv2 (arXiv:2304.07193, with registers arXiv:2309.16588): 14-px patches,
  layer scale in every block, optionally register tokens (``reg_token``)
  and, for ViT-g, a SwiGLU MLP packed into ``mlp.fc1`` (2H, C);
- SigLIP (arXiv:2303.15343; SigLIP 2, arXiv:2502.14786, in timm's same
  layout): no class token, the patch tokens pooled by a multihead
  attention-pooling head (``attn_pool.*``, MAP, arXiv:1810.00825), or in
  its GAP variant averaged after the final norm (``norm``, no
  ``fc_norm``).

- DINOv3 (arXiv:2508.10104) in timm's layout: registers (``reg_token``)
  and layer scales (``gamma_1``, ``gamma_2``) without a position table
  (rotary positions only), optionally q/v biases and a SwiGLU MLP
  (``mlp.fc1_g``, ``mlp.fc1_x``); Meta's layout (``storage_tokens``,
  ``rope_embed.periods``, ``qkv.bias_mask``) is renamed to it first, see
  :mod:`.dinov3_family`.

Families the backbone cannot express yet are recognised by their own keys
and refused, naming the family: a ``w12``/``w3`` SwiGLU (Meta's DINOv2-g
layout) and attention pooling next to a class token. So is a partial
match (layer scale in some blocks only, a second head without its token,
an attention pool without its MLP): nothing loads half-read.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass

from mmlvit.checkpoint import CheckpointError

from .dinov2_family import check_dinov2, is_dinov2
from .dinov3_family import check_dinov3, is_dinov3, meta_to_timm
from .errors import preview_keys
from .eva_blocks import EVA02_SIGNATURE


@dataclass(frozen=True)
class Family:
    """A ViT family the readers convert.

    Attributes:
        title (str): Its name in messages.
        signature (str): The keys that identify it.
        rule (str): What the reader and the backbone do with what is
            special to it (logged with every read).
    """

    title: str
    signature: str
    rule: str


FAMILIES = {
    'timm': Family('ViT/DeiT', 'blocks.N.* and patch_embed.proj.*', ''),
    'deit3': Family(
        'DeiT III',
        'a layer scale in every block (blocks.N.ls1.gamma, ls2.gamma)',
        'layer scales -> layers.N.attn.gamma1 / ffn.gamma2 (component '
        "'layer_scale'); a class token without a position gets a zero "
        'pos_embed row (the same function)',
    ),
    'deit-distilled': Family(
        'distilled DeiT',
        'dist_token (and head_dist with a classifier)',
        'the distillation token is carried: the student keeps it after the '
        "class token (with_dist_token=True, component 'cls_token') and its "
        'DeiTClsHead averages head and head_dist, as timm does at eval',
    ),
    'clip': Family(
        'CLIP',
        'norm_pre (pre-norm) and a patch embedding without bias',
        'norm_pre -> pre_norm, no patch bias; the file cannot show the '
        'activation: configs use QuickGELU and LayerNorm eps 1e-5 (OpenAI '
        'CLIP); set act_cfg GELU for towers trained with GELU',
    ),
    'eva02': Family(
        'EVA-02',
        'split q/v biases (blocks.N.attn.q_bias, v_bias) or q_proj/k_proj/'
        'v_proj, and a SwiGLU MLP',
        "q_bias/v_bias -> one qkv bias with a zero key part (the student's "
        'k bias starts at zero); SwiGLU (fc1_g, fc1_x -> ffn.w12, fc2 -> '
        'ffn.w3, mlp.norm -> ffn.norm) -> SwiGLUFFN; fc_norm after average '
        'pooling -> ln2; rotary positions (no weights) as rope_cfg '
        "type 'eva02' with the pre-training grid (16, 16) of every EVA-02 "
        'release',
    ),
    'dinov2': Family(
        'DINOv2',
        '14-px patches and a layer scale in every block, optionally '
        'reg_token (registers)',
        'layer scales as DeiT III; the registers are carried without a '
        'position (num_register_tokens; component cls_token, as the class '
        'and distillation tokens: FullCopy copies them, Copy and MLPCopy '
        'leave them fresh); the class position timm '
        'folded into cls_token gets a zero pos_embed row; a packed SwiGLU '
        "MLP (ViT-g) -> ffn.w12/w3 (ffn_type 'swiglu'); GELU, LN eps "
        '1e-6; a position table for another image size than the model is '
        "resampled with timm's resample_abs_pos_embed (as timm loads "
        'DINOv2) when the reader is given that size',
    ),
    'dinov3': Family(
        'DINOv3',
        'reg_token (registers) and a layer scale in every block '
        "(blocks.N.gamma_1, gamma_2) without pos_embed; Meta's layout: "
        'storage_tokens, rope_embed.periods, qkv.bias_mask',
        'no position table (pos_embed_type none): rotary positions as '
        "rope_cfg type 'dinov3' (period base 100, patch centres scaled "
        'to [-1, 1] per axis; class token and registers unrotated); the '
        'registers and layer scales as DINOv2; q_bias/v_bias -> one qkv '
        'bias with a zero key part (the masked key bias), no bias -> '
        'qkv_bias=False; a SwiGLU (fc1_g, fc1_x -> ffn.w12, fc2 -> ffn.w3) '
        "-> ffn_type 'swiglu'; LN eps 1e-5; class-token pooling after the "
        "final norm (Meta's); for timm's default (global_pool 'avg', the "
        "mean of the normed patch tokens) set out_type 'featmap' and a "
        'GlobalAveragePooling neck',
    ),
    'siglip': Family(
        'SigLIP',
        'attn_pool.* (MAP head) and no class token; the GAP variant: no '
        'class token, a final norm, no fc_norm',
        "no class token (with_cls_token=False), the backbone's out_type "
        "'raw' feeds attn_pool -> neck (AttentionPoolingNeck, softmax over "
        "the tokens; component 'attn_pool', copied by every copying "
        "setting); the GAP variant: out_type 'featmap' + GlobalAveragePooling"
        '. The file cannot show the activation: configs use exact GELU '
        "(timm's B/16 SigLIP); set act_cfg dict(type='GELU', "
        "approximate='tanh') in layer_cfgs and the neck for gelu_tanh "
        'towers (B/32, So400m, giant-opt)',
    ),
}
# Every tensor of timm's attention pool (AttentionPoolLatent).
ATTN_POOL_KEYS = ('attn_pool.latent',) + tuple(
    f'attn_pool.{module}.{kind}'
    for module in ('q', 'kv', 'proj', 'norm', 'mlp.fc1', 'mlp.fc2')
    for kind in ('weight', 'bias')
)
_LAYER_SCALE = re.compile(r'blocks\.(\d+)\.(ls[12]\.gamma|gamma_[12])$')
_BLOCK = re.compile(r'blocks\.(\d+)\.')
# (pattern over the keys, the family it resembles, what it needs).
_UNSUPPORTED = (
    (
        re.compile(r'blocks\.\d+\.mlp\.(w12|w3)\.'),
        'DINOv2-g',
        'a w12/w3 SwiGLU MLP',
    ),
)
SUPPORTED = (
    'ViT/DeiT (timm, DeiT, MAE, DINO, MoCo v3, iBOT releases), DeiT III, '
    'distilled DeiT, CLIP (timm and OpenAI/OpenCLIP layouts), SigLIP (MAP '
    "and GAP), EVA-02, DINOv2 (timm's layout, with or without registers) "
    "and DINOv3 (timm's and Meta's layouts)"
)


def identify_family(weights: Mapping, name: str, format: str) -> str:
    """The family (a key of :data:`FAMILIES`) of timm-layout weights.

    Args:
        weights (Mapping[str, Tensor]): timm ViT keys.
        name (str): The file, for messages.
        format (str): The format asked for; a family's own format
            (``'deit3'``, ``'deit-distilled'``, ``'clip'``, ``'eva02'``,
            ``'dinov2'``, ``'dinov3'``, ``'siglip'``)
            must be that family.

    Returns:
        str: ``'timm'`` (plain ViT/DeiT) or a family name.

    Raises:
        CheckpointError: The keys belong to an unsupported family, match
            a family partly, or are not the family ``format`` names; the
            message names the family the file resembles, the keys that do
            not fit and what is missing.
    """
    weights = meta_to_timm(weights, name)
    keys = list(weights)
    dinov3 = is_dinov3(weights)
    if dinov3:
        check_dinov3(weights, name)
    for pattern, family, needs in _UNSUPPORTED:
        hits = [k for k in keys if pattern.search(k)]
        if hits:
            raise CheckpointError(
                f'{name} (read as {format!r}) looks like {family}: {needs} '
                f'cannot be converted yet. Keys that do not fit: '
                f'{preview_keys(hits, 8)}. Supported: {SUPPORTED}.'
            )
    if not dinov3:
        check_dinov2(weights, name)
    if any(k.startswith('attn_pool.') for k in keys):
        _check_attn_pool(keys, name)
    found = [
        f
        for f in ('eva02', 'deit3', 'deit-distilled', 'clip', 'siglip')
        if _has(f, keys)
    ]
    if dinov3:
        found.insert(0, 'dinov3')
    elif is_dinov2(weights):
        found.insert(0, 'dinov2')
    if 'deit3' in found:
        _check_layer_scale(keys, name)
    if 'deit-distilled' in found:
        _check_distilled(keys, name)
    family = found[0] if found else 'timm'
    if format in FAMILIES and format != 'timm' and format not in found:
        wanted = FAMILIES[format]
        raise CheckpointError(
            f'{name} is not a {wanted.title} checkpoint: expected '
            f'{wanted.signature}; missing: {_missing(format, keys)}. It '
            f'resembles {FAMILIES[family].title}: pass format='
            f"{family!r} or 'auto'."
        )
    return family


def _has(family, keys):
    if family == 'eva02':
        return any(EVA02_SIGNATURE.match(k) for k in keys)
    if family == 'deit3':
        return any(_LAYER_SCALE.match(k) for k in keys)
    if family == 'deit-distilled':
        return any(
            k == 'dist_token' or k.startswith('head_dist.') for k in keys
        )
    if family == 'siglip':
        pooled = any(k.startswith('attn_pool.') for k in keys)
        gap = 'norm.weight' in keys and 'fc_norm.weight' not in keys
        return 'cls_token' not in keys and (pooled or gap)
    return 'norm_pre.weight' in keys


def _missing(family, keys):
    if family == 'eva02':
        return 'blocks.N.attn.q_bias, blocks.N.attn.v_bias (or q_proj)'
    if family == 'dinov3':
        return ', '.join(
            text
            for absent, text in (
                ('reg_token' not in keys, 'reg_token'),
                (not _has('deit3', keys), 'blocks.N.gamma_1, gamma_2'),
                ('pos_embed' in keys, 'no pos_embed (this file has one)'),
            )
            if absent
        )
    if family == 'dinov2':
        return (
            '14-px patches (patch_embed.proj.weight (C, 3, 14, 14)) and '
            + (_missing('deit3', keys))
        )
    if family == 'deit3':
        return 'blocks.N.ls1.gamma, blocks.N.ls2.gamma'
    if family == 'deit-distilled':
        return 'dist_token' + (
            ', head_dist.*' if 'head.weight' in keys else ''
        )
    if family == 'siglip':
        absent = '; cls_token should be absent' if 'cls_token' in keys else ''
        return 'attn_pool.* (MAP), or norm.* without fc_norm.* (GAP)' + absent
    return 'norm_pre.weight, norm_pre.bias' + (
        '; patch_embed.proj.bias should be absent'
        if 'patch_embed.proj.bias' in keys
        else ''
    )


def _check_layer_scale(keys, name):
    blocks = {int(m.group(1)) for m in map(_BLOCK.match, keys) if m}
    # ('ls1.gamma' | 'gamma_1') -> branch '1'
    scales = {
        (int(m.group(1)), re.sub(r'\D', '', m.group(2)))
        for m in map(_LAYER_SCALE.match, keys)
        if m
    }
    absent = [
        f'blocks.{i}.ls{branch}.gamma'
        for i in sorted(blocks)
        for branch in '12'
        if (i, branch) not in scales
    ]
    if absent:
        present = [k for k in keys if _LAYER_SCALE.match(k)]
        raise CheckpointError(
            f'{name} resembles DeiT III ({FAMILIES["deit3"].signature}) but '
            f'only partly: it has {preview_keys(present, 6)} and is missing '
            f'{preview_keys(absent, 6)}. A ViT with layer scale in some '
            'blocks only is not supported; check that the file is complete.'
        )


def _check_distilled(keys, name):
    head = 'head.weight' in keys
    head_dist = any(k.startswith('head_dist.') for k in keys)
    missing = []
    if 'dist_token' not in keys:
        missing.append('dist_token')
    if head and not head_dist:
        missing.append('head_dist.weight, head_dist.bias')
    if head_dist and not head:
        missing.append('head.weight, head.bias')
    if missing:
        fitting = [
            k for k in keys if k == 'dist_token' or k.startswith('head_dist.')
        ]
        raise CheckpointError(
            f'{name} resembles a distilled DeiT '
            f'({FAMILIES["deit-distilled"].signature}) but only partly: it '
            f'has {preview_keys(fitting, 4)} and is missing '
            f'{"; ".join(missing)}. Check that the file is complete.'
        )


def _check_attn_pool(keys, name):
    """A MAP head: every tensor of it, and no class token."""
    present = [k for k in keys if k.startswith('attn_pool.')]
    if 'cls_token' in keys:
        raise CheckpointError(
            f'{name} has an attention pool ({preview_keys(present, 3)}) and '
            'a class token: MAP pooling next to a class token cannot be '
            'converted yet (the neck pools every token the backbone gives; '
            'SigLIP has no class token). Supported: '
            f'{SUPPORTED}.'
        )
    absent = [k for k in ATTN_POOL_KEYS if k not in keys]
    if absent:
        raise CheckpointError(
            f'{name} resembles SigLIP ({FAMILIES["siglip"].signature}) but '
            f'its attention pool is partial: it has '
            f'{preview_keys(present, 6)} and is missing '
            f'{preview_keys(absent, 6)}. Check that the file is complete '
            '(a MAP head needs the latent query, q, kv, proj, norm and the '
            'MLP).'
        )
