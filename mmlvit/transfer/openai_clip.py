"""The OpenAI / OpenCLIP CLIP file layout -> timm's ViT keys.

OpenAI's CLIP (arXiv:2103.00020) and OpenCLIP save the image tower under
``visual.``, beside the text tower. The correspondence with timm's CLIP
ViT (width C, patch p, N = H*W patches, projection to D):

- ``visual.conv1.weight`` (C, 3, p, p), no bias -> ``patch_embed.proj.weight``
- ``visual.class_embedding`` (C,) -> ``cls_token`` (1, 1, C)
- ``visual.positional_embedding`` (1 + N, C) -> ``pos_embed`` (1, 1 + N, C)
- ``visual.ln_pre.*`` -> ``norm_pre.*``; ``visual.ln_post.*`` -> ``norm.*``
- ``visual.transformer.resblocks.i.`` -> ``blocks.i.``, and in a block
  ``ln_1`` -> ``norm1``, ``attn.in_proj_weight`` (3C, C) and
  ``in_proj_bias`` -> ``attn.qkv.*``, ``attn.out_proj`` -> ``attn.proj``,
  ``ln_2`` -> ``norm2``, ``mlp.c_fc`` -> ``mlp.fc1``, ``mlp.c_proj`` ->
  ``mlp.fc2``
- ``visual.proj`` (C, D), applied as ``x @ proj`` -> ``head.weight``
  (D, C) with a zero ``head.bias`` (D,)

``in_proj_weight`` stacks q, k, v with the heads in order inside each, as
timm's ``qkv`` does. The text tower and the logit scale are dropped.
"""

import re

from mmlvit.checkpoint import CheckpointError

from .errors import preview_keys

PREFIX = 'visual.'
_TOP_LEVEL = {
    'conv1.weight': 'patch_embed.proj.weight',
    'ln_pre.weight': 'norm_pre.weight',
    'ln_pre.bias': 'norm_pre.bias',
    'ln_post.weight': 'norm.weight',
    'ln_post.bias': 'norm.bias',
}
_BLOCK_SUFFIXES = {
    'ln_1.weight': 'norm1.weight',
    'ln_1.bias': 'norm1.bias',
    'attn.in_proj_weight': 'attn.qkv.weight',
    'attn.in_proj_bias': 'attn.qkv.bias',
    'attn.out_proj.weight': 'attn.proj.weight',
    'attn.out_proj.bias': 'attn.proj.bias',
    'ln_2.weight': 'norm2.weight',
    'ln_2.bias': 'norm2.bias',
    'mlp.c_fc.weight': 'mlp.fc1.weight',
    'mlp.c_fc.bias': 'mlp.fc1.bias',
    'mlp.c_proj.weight': 'mlp.fc2.weight',
    'mlp.c_proj.bias': 'mlp.fc2.bias',
}
_BLOCK_KEY = re.compile(r'transformer\.resblocks\.(\d+)\.(.+)$')


def looks_openai_clip(keys) -> bool:
    """Whether ``keys`` hold an OpenAI/OpenCLIP image tower."""
    keys = [k.removeprefix('module.') for k in keys]
    return f'{PREFIX}conv1.weight' in keys and any(
        k.startswith(f'{PREFIX}transformer.resblocks.') for k in keys
    )


def openai_clip_to_timm(weights, name):
    """The image tower of an OpenAI/OpenCLIP state dict in timm's keys.

    Args:
        weights (Mapping[str, Tensor]): The CLIP model's state dict
            (``module.`` prefixes allowed).
        name (str): The file, for messages.

    Returns:
        tuple[dict, list[str]]: The tower in timm keys (shapes above) and
        the dropped keys (text tower, logit scale).

    Raises:
        CheckpointError: No image tower, or tower keys without a timm
            counterpart (e.g. an attention-pooling tower).
    """
    timm, dropped, unknown = {}, [], []
    for key, value in weights.items():
        key = key.removeprefix('module.')
        if not key.startswith(PREFIX):
            dropped.append(key)
            continue
        key = key[len(PREFIX) :]
        block = _BLOCK_KEY.match(key)
        if key in _TOP_LEVEL:
            timm[_TOP_LEVEL[key]] = value
        elif block and block.group(2) in _BLOCK_SUFFIXES:
            index, suffix = block.groups()
            timm[f'blocks.{index}.{_BLOCK_SUFFIXES[suffix]}'] = value
        elif key == 'class_embedding':
            timm['cls_token'] = value.reshape(1, 1, -1)
        elif key == 'positional_embedding':
            timm['pos_embed'] = value.unsqueeze(0)
        elif key == 'proj':
            timm['head.weight'] = value.t().contiguous()
            timm['head.bias'] = value.new_zeros(value.shape[1])
        else:
            unknown.append(PREFIX + key)
    if unknown or 'patch_embed.proj.weight' not in timm:
        raise CheckpointError(
            f'Cannot read {name} as an OpenAI/OpenCLIP CLIP image tower: '
            + (
                f'{len(unknown)} visual keys have no counterpart in a ViT '
                f'(e.g. {preview_keys(unknown, 8)}).'
                if unknown
                else f'it has no {PREFIX}conv1.weight.'
            )
        )
    return timm, dropped
