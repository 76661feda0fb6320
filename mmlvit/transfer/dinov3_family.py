"""DINOv3 (arXiv:2508.10104) files: detection, checks and Meta's layout.

timm's layout (its ``Eva`` with ``rope_type='dinov3'``; width C, R
registers, SwiGLU hidden width H):

- ``cls_token`` (1, 1, C), ``reg_token`` (1, R, C) (R = 4) and no
  ``pos_embed``: positions are rotary only (no weights; the backbone
  rebuilds them, ``rope_cfg`` type ``'dinov3'``) and skip the class and
  register tokens;
- layer scales ``blocks.N.gamma_1`` / ``gamma_2`` (C,) in every block;
- attention ``blocks.N.attn.qkv.weight`` (3C, C) without bias, or with
  ``attn.q_bias`` / ``attn.v_bias`` (C,) (the ``_qkvb`` models): the key
  bias is masked to zero in Meta's models, so the reader writes
  ``attn.qkv.bias`` = [q_bias | 0 | v_bias], the same function;
- an MLP ``mlp.fc1`` / ``fc2`` (GELU), or a SwiGLU ``mlp.fc1_g``,
  ``mlp.fc1_x`` (H, C) and ``mlp.fc2`` (C, H) (S+, H+, 7B), rewritten as
  ``mlp.w12`` = [fc1_g | fc1_x] (2H, C) and ``mlp.w3``, the names of
  mmpretrain's ``SwiGLUFFN`` (the blocks: :mod:`.eva_blocks`);
- a final ``norm`` (LayerNorm eps 1e-5), no ``fc_norm``.

Meta's own layout (:func:`meta_to_timm`) is renamed to timm's first:
``storage_tokens`` -> ``reg_token``, ``ls1.gamma``/``ls2.gamma`` (kept),
``attn.qkv.bias`` times ``attn.qkv.bias_mask`` (its key part masked to
zero) -> the q/v biases, none when all zero (as timm loads the models
without), ``mlp.w1``/``w2``/``w3`` -> ``mlp.fc1_g``/``fc1_x``/``fc2``;
``rope_embed.periods`` (D/4,) must be the base-100 periods the backbone
rebuilds (to bfloat16 precision, as Meta stores them); ``mask_token``,
``local_cls_norm.*`` (7B, local crops) and ``projectors.*`` (EUPE's
distillation heads) are pre-training only.
"""

import re
from collections.abc import Mapping

import torch

from mmlvit.checkpoint import CheckpointError

from .dinov2_family import check_register_shape

META_LAYOUT = re.compile(r'^storage_tokens$|^rope_embed\.|\.bias_mask$')
_META_PRETRAINING = re.compile(r'^(mask_token|local_cls_norm\.|projectors\.)')
_META_MLP = {
    'mlp.w1.': 'mlp.fc1_g.',
    'mlp.w2.': 'mlp.fc1_x.',
    'mlp.w3.': 'mlp.fc2.',
}
ROPE_BASE = 100.0
_LAYER_SCALE = re.compile(r'blocks\.\d+\.(gamma_[12]|ls[12]\.gamma)$')


def is_dinov3(weights: Mapping) -> bool:
    """Registers without a position table: DINOv3 in timm's layout
    (Meta's is renamed to it first, :func:`meta_to_timm`)."""
    return 'reg_token' in weights and 'pos_embed' not in weights


def check_dinov3(weights: Mapping, name: str) -> None:
    """Refuse files (in timm's layout) that are not DINOv3 as the
    backbone expresses it: no class token, no layer scales, a ``reg_token`` not
    (1, R, C) with 1 <= R <= 16 at the model's width C.

    Raises:
        CheckpointError: Naming the keys and the fix.
    """
    missing = [
        text
        for absent, text in (
            ('cls_token' not in weights, 'cls_token (a class token)'),
            (
                not any(_LAYER_SCALE.match(k) for k in weights),
                'blocks.N.gamma_1 / gamma_2 (layer scales)',
            ),
        )
        if absent
    ]
    if missing:
        raise CheckpointError(
            f'{name} has register tokens (reg_token) and no position table '
            f'(pos_embed) like DINOv3, but lacks {" and ".join(missing)}. '
            'Check that the file is a complete DINOv3 checkpoint.'
        )
    check_register_shape(weights, name)


def meta_to_timm(weights: Mapping, name: str) -> dict:
    """Meta's DINOv3 keys -> timm's (see the module docstring); a file
    in timm's layout comes back unchanged.

    Raises:
        CheckpointError: The RoPE periods are not base 100's, or a key
            bias mask is not 0/1 (an uninitialised mask holds NaN).
    """
    if not any(META_LAYOUT.search(k) for k in weights):
        return dict(weights)
    out = {}
    for key, value in weights.items():
        if _META_PRETRAINING.match(key) or key.endswith('.bias_mask'):
            continue
        if key == 'rope_embed.periods':
            _check_periods(value, name)
            continue
        if key.endswith('attn.qkv.bias'):
            out.update(_masked_bias(weights, key, name))
            continue
        key = 'reg_token' if key == 'storage_tokens' else key
        for meta, timm in _META_MLP.items():
            key = key.replace(meta, timm)
        out[key] = value
    return out


def _check_periods(periods, name):
    bands = periods.numel()
    exponents = torch.arange(bands, dtype=torch.float64) / bands
    expected = ROPE_BASE**exponents
    if periods.dim() != 1 or not torch.allclose(
        periods.double(), expected, rtol=1e-2, atol=0
    ):
        raise CheckpointError(
            f'{name}: rope_embed.periods {periods.flatten()[:4].tolist()}... '
            f'are not the base-{ROPE_BASE:g} periods the backbone rebuilds '
            f'({expected[:4].tolist()}...): another RoPE schedule is not '
            "read from Meta's layout; load the file into timm's Eva with "
            'that rope_temperature, save its state_dict() and set the '
            'rope_cfg temperature by hand.'
        )


def _masked_bias(weights, key, name):
    """Meta's qkv bias times its mask (q and v rows 1, k rows 0) as
    timm's q_bias and v_bias; nothing when all zero."""
    bias = weights[key]
    mask = weights.get(key + '_mask', torch.ones_like(bias))
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise CheckpointError(
            f'{name}: {key}_mask is not 0/1 (NaN: never initialised); the '
            'key part of the bias cannot be masked. Save the model after '
            'its init_weights().'
        )
    q, k, v = (bias * mask).chunk(3)
    if k.any():
        raise CheckpointError(
            f'{name}: {key} has a key bias the mask keeps; DINOv3 masks it '
            'to zero. The file is not a DINOv3 checkpoint.'
        )
    if not (q.any() or v.any()):
        return {}
    prefix = key.removesuffix('qkv.bias')
    return {prefix + 'q_bias': q, prefix + 'v_bias': v}
