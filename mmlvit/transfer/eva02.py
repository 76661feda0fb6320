"""EVA-02 blocks (timm's ``Eva``) -> the ViT block keys the readers map.

EVA-02 (arXiv 2303.11331) differs from a ViT block in two places the keys
show (width C, SwiGLU hidden width H):

- attention: a fused ``attn.qkv.weight`` (3C, C) with separate
  ``attn.q_bias`` and ``attn.v_bias`` (C,) and no key bias (tiny, small),
  or ``attn.q_proj``, ``attn.k_proj`` (no bias), ``attn.v_proj`` (base,
  large). Both become ``attn.qkv.weight`` (3C, C) and ``attn.qkv.bias``
  = [q_bias | 0 | v_bias]: the student's key bias starts at zero, the
  same function (a key bias adds a per-query constant that softmax
  cancels; EVA-02 has none).
- MLP: SwiGLU ``silu(x W_g) * (x W_x)``, either packed (``mlp.fc1``
  (2H, C), gate rows first, ``mlp.fc2`` (C, H)) or separate with a
  LayerNorm on the hidden units (``mlp.fc1_g``, ``mlp.fc1_x`` (H, C),
  ``mlp.norm`` (H,), ``mlp.fc2``). Both become ``mlp.w12`` = [W_g | W_x]
  (2H, C), ``mlp.w3`` (C, H) and ``mlp.norm``, the names of mmpretrain's
  ``SwiGLUFFN`` (which computes ``w3(norm(silu(x1) * x2))`` with
  [x1 | x2] = ``w12(x)``).

The rotary position embedding has no weights: the backbone rebuilds it
(``rope_cfg``). Everything else keeps timm's keys.
"""

import re
from collections import OrderedDict

import torch

from mmlvit.checkpoint import CheckpointError

from .errors import preview_keys

_BLOCK = re.compile(r'blocks\.(\d+)\.(attn|mlp)\.(.+)$')
SIGNATURE = re.compile(
    r'blocks\.\d+\.(attn\.(q_bias|v_bias|q_proj\.weight)|mlp\.fc1_g\.weight)$'
)


def eva02_to_vit_blocks(weights, name):
    """Rewrite every EVA-02 block's attention and MLP keys.

    Args:
        weights (Mapping[str, Tensor]): timm ``Eva`` keys.
        name (str): The file, for messages.

    Returns:
        OrderedDict: The same weights with ``blocks.N.attn.qkv.{weight,
        bias}`` and ``blocks.N.mlp.{w12,w3,norm}.*``.

    Raises:
        CheckpointError: A block lacks part of its attention or MLP (q_bias
            without v_bias, fc1_g without fc1_x, ...), a block has a plain
            (non-gated) MLP, or a tensor has the wrong size.
    """
    parts = {}
    out = OrderedDict()
    for key, value in weights.items():
        match = _BLOCK.match(key)
        if match is None:
            out[key] = value
        else:
            index, module, rest = match.groups()
            parts.setdefault(int(index), {})[f'{module}.{rest}'] = value
    for index in sorted(parts):
        block = parts[index]
        prefix = f'blocks.{index}.'
        attn = _attention(block, prefix, name)
        mlp = _mlp(block, prefix, name)
        leftover = [prefix + k for k in block]
        if leftover:
            raise CheckpointError(
                f'{name}: EVA-02 block {index} has keys with no counterpart: '
                f'{preview_keys(leftover)}.'
            )
        out.update((prefix + k, v) for k, v in {**attn, **mlp}.items())
    return out


def _take(block, prefix, name, keys, what):
    missing = [prefix + k for k in keys if k not in block]
    if missing:
        present = sorted(prefix + k for k in block if k.startswith(what))
        raise CheckpointError(
            f'{name} resembles EVA-02 but only partly: block '
            f'{prefix[:-1]} has {preview_keys(present, 6)} and is missing '
            f'{preview_keys(missing, 6)}. Check that the file is complete.'
        )
    return [block.pop(k) for k in keys]


def _attention(block, prefix, name):
    if 'attn.q_proj.weight' in block:
        q, k, v, q_bias, v_bias = _take(
            block,
            prefix,
            name,
            [f'attn.{p}_proj.weight' for p in 'qkv']
            + ['attn.q_proj.bias', 'attn.v_proj.bias'],
            'attn.',
        )
        weight = torch.cat([q, k, v])
    else:
        weight, q_bias, v_bias = _take(
            block,
            prefix,
            name,
            ['attn.qkv.weight', 'attn.q_bias', 'attn.v_bias'],
            'attn.',
        )
    C = weight.shape[1]
    wrong = [
        f'{prefix}attn.{n} {tuple(t.shape)}'
        for n, t, shape in (
            ('qkv weight', weight, (3 * C, C)),
            ('q bias', q_bias, (C,)),
            ('v bias', v_bias, (C,)),
        )
        if tuple(t.shape) != shape
    ]
    if wrong:
        raise CheckpointError(
            f'{name}: {", ".join(wrong)} do not fit the width {C}: q, k, v '
            f'weights are ({C}, {C}) each and the q, v biases ({C},). The '
            'file is damaged or mixes two models.'
        )
    rest = {
        k: block.pop(k)
        for k in ('attn.proj.weight', 'attn.proj.bias')
        if k in block
    }
    bias = torch.cat([q_bias, torch.zeros_like(q_bias), v_bias])
    return {'attn.qkv.weight': weight, 'attn.qkv.bias': bias, **rest}


def _mlp(block, prefix, name):
    if 'mlp.fc1_g.weight' in block:
        gate, gate_bias, x, x_bias = _take(
            block,
            prefix,
            name,
            ['mlp.fc1_g.weight', 'mlp.fc1_g.bias']
            + ['mlp.fc1_x.weight', 'mlp.fc1_x.bias'],
            'mlp.',
        )
        if gate.shape != x.shape:
            raise CheckpointError(
                f'{name}: {prefix}mlp.fc1_g.weight {tuple(gate.shape)} and '
                f'fc1_x.weight {tuple(x.shape)} differ; a SwiGLU needs '
                'both (H, C). The file is damaged or mixes two models.'
            )
        w12 = {
            'weight': torch.cat([gate, x]),
            'bias': torch.cat([gate_bias, x_bias]),
        }
    else:
        fc1, fc1_bias = _take(
            block, prefix, name, ['mlp.fc1.weight', 'mlp.fc1.bias'], 'mlp.'
        )
        w12 = {'weight': fc1, 'bias': fc1_bias}
    fc2, fc2_bias = _take(
        block, prefix, name, ['mlp.fc2.weight', 'mlp.fc2.bias'], 'mlp.'
    )
    hidden = fc2.shape[1]
    if w12['weight'].shape[0] != 2 * hidden:
        raise CheckpointError(
            f'{name}: EVA-02 block {prefix[:-1]} has an MLP of '
            f'{w12["weight"].shape[0]} hidden rows for a projection from '
            f'{hidden}: a SwiGLU has twice as many (gate and value). A '
            'plain MLP in an EVA-02 file is not supported.'
        )
    out = {f'mlp.w12.{k}': v for k, v in w12.items()}
    out.update({'mlp.w3.weight': fc2, 'mlp.w3.bias': fc2_bias})
    for kind in ('weight', 'bias'):
        if f'mlp.norm.{kind}' in block:
            out[f'mlp.norm.{kind}'] = block.pop(f'mlp.norm.{kind}')
    return out
