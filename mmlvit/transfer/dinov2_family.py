"""What is special to DINOv2 files in timm's layout (arXiv:2304.07193,
registers arXiv:2309.16588): detection, the checks that refuse partial
matches, the packed SwiGLU MLP of ViT-g, and the position table resampled
to the model's image size (DINOv3, registers without a table, is
:mod:`.dinov3_family`'s).

timm keeps DINOv2's registers in ``reg_token`` (1, R, C) without a position;
for the register models it folds the class token's position into
``cls_token`` and keeps ``pos_embed`` (1, H*W, C) for the patches only
(``no_embed_class``), the models without registers keep the class row. The
released tables are 37 x 37 (518 px at patch 14).
"""

import math
import re
from collections.abc import Mapping

import torch
from mmengine.logging import print_log
from timm.layers import resample_abs_pos_embed

from mmlvit.checkpoint import CheckpointError

PATCH_SIZE = 14
MAX_REGISTERS = 16
_LAYER_SCALE = re.compile(r'blocks\.\d+\.ls[12]\.gamma$')
_FC = re.compile(
    r'backbone\.layers\.(\d+)\.ffn\.layers\.(0\.0|1)\.(weight|bias)$'
)


def is_dinov2(weights: Mapping) -> bool:
    """Registers, or (without CLIP's pre-norm) 14-px patches with timm's
    layer scales: a DINOv2 file in timm's layout."""
    if 'reg_token' in weights:
        return True
    patch = weights.get('patch_embed.proj.weight')
    return (
        patch is not None
        and patch.dim() == 4
        and patch.shape[-1] == PATCH_SIZE
        and 'norm_pre.weight' not in weights
        and any(_LAYER_SCALE.match(k) for k in weights)
    )


def check_dinov2(weights: Mapping, name: str) -> None:
    """Refuse register files that are not DINOv2 as the backbone expresses
    it: registers without a class token or without layer scale, a
    ``reg_token`` not (1, R, C) with 1 <= R <= 16 at the model's width C.

    Raises:
        CheckpointError: Naming the family or the tensor and the fix.
    """
    reg = weights.get('reg_token')
    if reg is None:
        return
    missing = [
        text
        for absent, text in (
            ('cls_token' not in weights, 'cls_token (a class token)'),
            (
                not any(_LAYER_SCALE.match(k) for k in weights),
                'blocks.N.ls1.gamma / ls2.gamma (layer scales)',
            ),
        )
        if absent
    ]
    if missing:
        raise CheckpointError(
            f'{name} has register tokens (reg_token) but is not DINOv2: it '
            f'lacks {" and ".join(missing)}. Registers with pooled patches '
            "or without layer scale (e.g. timm's reg*_gap models) are not "
            'supported; check the file is a complete DINOv2 checkpoint.'
        )
    check_register_shape(weights, name)


def check_register_shape(weights: Mapping, name: str) -> None:
    """``reg_token`` is (1, R, C) with C the patch embedding's width and
    1 <= R <= MAX_REGISTERS.

    Raises:
        CheckpointError: It is not, naming its shape and the expected one.
    """
    reg = weights['reg_token']
    width = weights['patch_embed.proj.weight'].shape[0]
    if (
        reg.dim() != 3
        or reg.shape[0] != 1
        or reg.shape[2] != width
        or not 1 <= reg.shape[1] <= MAX_REGISTERS
    ):
        raise CheckpointError(
            f'{name}: reg_token {tuple(reg.shape)} does not fit the model: '
            f'expected (1, R, {width}) with 1 <= R <= {MAX_REGISTERS} (width '
            f'{width} from patch_embed.proj.weight). The file is damaged or '
            'mixes two models.'
        )


def pack_swiglu(state: dict, name: str) -> bool:
    """Rename timm's packed SwiGLU MLP (``mlp.fc1`` (2H, C) = [x1; x2],
    silu(x1) * x2, then ``mlp.fc2`` (C, H)) to mmpretrain's SwiGLU keys
    (``ffn.w12``, chunked the same way, and ``ffn.w3``; the backbone's
    ``ffn_type='swiglu'`` of hidden width H), in place; True if it did.

    Raises:
        CheckpointError: Some blocks are packed and others not, or their
            hidden widths differ.
    """
    fc1, fc2 = {}, {}
    for key, value in state.items():
        match = _FC.match(key)
        if match and match.group(3) == 'weight':
            (fc1 if match.group(2) == '0.0' else fc2)[match.group(1)] = value
    packed = {
        i for i in fc1 if i in fc2 and fc1[i].shape[0] == 2 * fc2[i].shape[1]
    }
    if not packed:
        return False
    hidden = {fc2[i].shape[1] for i in packed}
    if packed != set(fc1) or len(hidden) != 1:
        plain = sorted(set(fc1) - packed, key=int)
        raise CheckpointError(
            f'{name} has a packed SwiGLU MLP (DINOv2 ViT-g: mlp.fc1 rows = 2 '
            f'x mlp.fc2 columns) in blocks {sorted(packed, key=int)[:6]} '
            f'but a plain MLP in {plain[:6]} or hidden widths {sorted(hidden)}'
            ': every block needs the same SwiGLU hidden width. The file is '
            'damaged or mixes two models.'
        )
    for key in [k for k in state if _FC.match(k)]:
        index, layer, kind = _FC.match(key).groups()
        target = 'w12' if layer == '0.0' else 'w3'
        state[f'backbone.layers.{index}.ffn.{target}.{kind}'] = state.pop(key)
    return True


def resample_position_table(state: dict, img_size: int, name: str) -> bool:
    """Resample ``backbone.pos_embed`` to the grid of ``img_size`` with
    timm's ``resample_abs_pos_embed`` (bicubic, antialiased: timm's DINOv2 at
    that size), in place, the class (and distillation) rows kept, and log
    it; False when the grid already fits."""
    pos = state.get('backbone.pos_embed')
    patch = state['backbone.patch_embed.projection.weight'].shape[-1]
    if pos is None:
        return False
    extra = sum(f'backbone.{t}_token' in state for t in ('cls', 'dist'))
    side = math.isqrt(pos.shape[1] - extra)
    # The grid of the patch embedding, which pads to a multiple of patch.
    new = -(-img_size // patch)
    if side * side != pos.shape[1] - extra:
        raise CheckpointError(
            f'{name}: pos_embed {tuple(pos.shape)} is not {extra} token rows '
            'and a square patch grid.'
        )
    if new == side:
        return False
    with torch.no_grad():
        state['backbone.pos_embed'] = resample_abs_pos_embed(
            pos.float(), (new, new), (side, side), num_prefix_tokens=extra
        ).to(pos.dtype)
    print_log(
        f'{name}: DINOv2 position table resampled from {side}x{side} to '
        f"{new}x{new} patches ({img_size} px) with timm's "
        'resample_abs_pos_embed.',
        logger='current',
    )
    return True
