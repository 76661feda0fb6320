"""timm's ``Eva`` blocks (EVA-02, DINOv3) -> the ViT block keys the readers
map.

EVA-02 (arXiv 2303.11331) and DINOv3 (arXiv 2508.10104) differ from a ViT
block in two places the keys show (width C, SwiGLU hidden width H):

- attention: a fused ``attn.qkv.weight`` (3C, C) with separate
  ``attn.q_bias`` and ``attn.v_bias`` (C,) and no key bias (EVA-02 tiny
  and small, DINOv3's ``_qkvb`` models), or ``attn.q_proj``,
  ``attn.k_proj`` (no bias), ``attn.v_proj`` (EVA-02 base, large). Both
  become ``attn.qkv.weight`` (3C, C) and ``attn.qkv.bias`` = [q_bias | 0 |
  v_bias]: the student's key bias starts at zero, the same function (a
  key bias adds a per-query constant that softmax cancels; these models
  have none, or mask it to zero).
- MLP: SwiGLU ``silu(x W_g) * (x W_x)``, either packed (``mlp.fc1``
  (2H, C), gate rows first, ``mlp.fc2`` (C, H); EVA-02) or separate
  (``mlp.fc1_g``, ``mlp.fc1_x`` (H, C), ``mlp.fc2``), with a LayerNorm on
  the hidden units (``mlp.norm`` (H,); EVA-02 base) or without. Both
  become ``mlp.w12`` = [W_g | W_x] (2H, C) and ``mlp.w3`` (C, H), the names
  of mmpretrain's ``SwiGLUFFN`` (which computes ``w3(norm(silu(x1) * x2))``
  with [x1 | x2] = ``w12(x)``); ``mlp.norm`` keeps its name.

Every EVA-02 block has both; a DINOv3 block may have a bias-free ``qkv``
and a plain GELU ``mlp.fc1``/``fc2``, which pass unchanged. The rotary
position embedding has no weights: the backbone rebuilds it
(``rope_cfg``). Everything else keeps timm's keys.
"""

import re
from collections.abc import Mapping

import torch

from mmlvit.checkpoint import CheckpointError

from .errors import preview_keys

EVA02_SIGNATURE = re.compile(
    r'blocks\.\d+\.(attn\.(q_bias|v_bias|q_proj\.weight)|mlp\.fc1_g\.weight)$'
)
_BLOCK_INDEX = re.compile(r'blocks\.(\d+)\.')


def eva_to_vit_blocks(
    weights: Mapping, name: str, title: str, gated: bool
) -> dict:
    """Rewrite every block's attention and MLP keys (see the module
    docstring); other keys pass unchanged.

    Args:
        weights (Mapping[str, Tensor]): timm ``Eva`` keys.
        name (str): The file, for messages.
        title (str): The family, for messages (``'EVA-02'``).
        gated (bool): Every block must have q/v biases and a SwiGLU
            (EVA-02); otherwise either may be absent (DINOv3).

    Returns:
        dict: The weights with ``blocks.N.attn.qkv.{weight,bias}`` and
        ``blocks.N.mlp.{w12,w3}.*``.

    Raises:
        CheckpointError: A block has part of its attention or MLP (q_bias
            without v_bias, fc1_g without fc1_x, ...), a packed MLP that is
            not a SwiGLU, or a tensor of the wrong size.
    """
    out = dict(weights)
    indices = {int(m.group(1)) for m in map(_BLOCK_INDEX.match, out) if m}
    for index in sorted(indices):
        block = _Block(out, f'blocks.{index}.', name, title)
        _attention(block, gated)
        _mlp(block, gated)
    return out


class _Block:
    """One block's keys in ``weights``, taken out by their names after
    ``prefix``."""

    def __init__(self, weights, prefix, name, title):
        self.weights, self.prefix = weights, prefix
        self.name, self.title = name, title

    def has(self, *keys):
        return any(self.prefix + k in self.weights for k in keys)

    def take(self, *keys):
        full = [self.prefix + k for k in keys]
        missing = [k for k in full if k not in self.weights]
        if missing:
            present = [k for k in full if k in self.weights]
            raise CheckpointError(
                f'{self.name} resembles {self.title} but only partly: block '
                f'{self.prefix[:-1]} has {preview_keys(present, 6)} and is '
                f'missing {preview_keys(missing, 6)}. Check that the file '
                'is complete.'
            )
        return [self.weights.pop(k) for k in full]

    def put(self, tensors):
        self.weights.update((self.prefix + k, v) for k, v in tensors.items())

    def damaged(self, text):
        return CheckpointError(
            f'{self.name}: {text} The file is damaged or mixes two models.'
        )


def _attention(block, gated):
    if block.has('attn.q_proj.weight'):
        q, k, v, q_bias, v_bias = block.take(
            *[f'attn.{p}_proj.weight' for p in 'qkv'],
            'attn.q_proj.bias',
            'attn.v_proj.bias',
        )
        weight = torch.cat([q, k, v])
    elif gated or block.has('attn.q_bias', 'attn.v_bias'):
        q_bias, v_bias = block.take('attn.q_bias', 'attn.v_bias')
        (weight,) = block.take('attn.qkv.weight')
    else:
        return
    C = weight.shape[1]
    wrong = [
        f'{block.prefix}attn.{n} {tuple(t.shape)}'
        for n, t, shape in (
            ('qkv weight', weight, (3 * C, C)),
            ('q bias', q_bias, (C,)),
            ('v bias', v_bias, (C,)),
        )
        if tuple(t.shape) != shape
    ]
    if wrong:
        raise block.damaged(
            f'{", ".join(wrong)} do not fit the width {C}: q, k, v weights '
            f'are ({C}, {C}) each and the q, v biases ({C},).'
        )
    bias = torch.cat([q_bias, torch.zeros_like(q_bias), v_bias])
    block.put({'attn.qkv.weight': weight, 'attn.qkv.bias': bias})


def _mlp(block, gated):
    split = [f'mlp.fc1_{p}.{t}' for p in 'gx' for t in ('weight', 'bias')]
    packed = not block.has(*split)
    if not packed:
        gate, gate_bias, x, x_bias = block.take(*split)
        if gate.shape != x.shape:
            raise block.damaged(
                f'{block.prefix}mlp.fc1_g.weight {tuple(gate.shape)} and '
                f'fc1_x.weight {tuple(x.shape)} differ; a SwiGLU needs both '
                '(H, C).'
            )
        w12, w12_bias = torch.cat([gate, x]), torch.cat([gate_bias, x_bias])
    elif gated:
        w12, w12_bias = block.take('mlp.fc1.weight', 'mlp.fc1.bias')
    else:
        return
    w3, w3_bias = block.take('mlp.fc2.weight', 'mlp.fc2.bias')
    hidden = w3.shape[1]
    if w12.shape[0] != 2 * hidden:
        raise CheckpointError(
            f'{block.name}: {block.title} block {block.prefix[:-1]} has an '
            f'MLP of {w12.shape[0]} hidden rows for a projection from '
            f'{hidden}: a SwiGLU has twice as many (gate and value).'
            + (
                f' A plain MLP in an {block.title} file is not supported.'
                if packed
                else ' The file is damaged or mixes two models.'
            )
        )
    block.put(
        {
            'mlp.w12.weight': w12,
            'mlp.w12.bias': w12_bias,
            'mlp.w3.weight': w3,
            'mlp.w3.bias': w3_bias,
        }
    )
