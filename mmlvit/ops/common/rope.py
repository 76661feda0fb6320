"""Rotary position embedding (RoPE) on the patch tokens of q or k.

RoPE (RoFormer, arXiv 2104.09864) rotates pairs of channels of every query
and key by angles that depend on the token's position, so that
``(R_i q)^T (R_j k)`` depends on the positions through their difference.
Axial 2-D RoPE for image patches (EVA-02, arXiv 2303.11331; DINOv3, arXiv
2508.10104) uses the row coordinate for half of the pairs and the column
coordinate for the other half; the tables are built in
:mod:`mmlvit.models.backbones.rope`. Tokens before the H*W patches (the
class token, registers) are not rotated.

Two channel layouts pair the channels:

- interleaved (``half=False``, EVA-02): pairs (x0, x1), (x2, x3), ...;
  ``sin``/``cos`` hold each pair's value twice: [a0, a0, a1, a1, ...];
- half (``half=True``, DINOv3): pairs (x_i, x_{i + d/2});
  ``sin``/``cos`` are [a0, a1, ..., a0, a1, ...].

Each pair (x, y) becomes (x cos a - y sin a, x sin a + y cos a).
"""

from typing import NamedTuple

import torch
from torch import Tensor


class RopeTables(NamedTuple):
    """The angles' sines and cosines for one patch grid.

    Attributes:
        sin (Tensor): (H*W, d), patches in raster order, laid out as
            ``half`` says.
        cos (Tensor): (H*W, d), likewise.
        half (bool): Channel pairing: False interleaved, True halves.
    """

    sin: Tensor
    cos: Tensor
    half: bool


def rotate_pairs(x: Tensor, half: bool) -> Tensor:
    """Each channel pair (x, y) -> (-y, x): (..., d) -> (..., d)."""
    if half:
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((-odd, even), dim=-1).flatten(-2)


def apply_rope(x: Tensor, rope: RopeTables) -> Tensor:
    """Rotate the patch tokens of queries or keys.

    Args:
        x (Tensor): (..., N, d), N = P + H*W: P prefix tokens (class token,
            registers) first, left as they are, then the H*W patches.
        rope (RopeTables): Tables of the (H, W) grid, (H*W, d) each.

    Returns:
        Tensor: (..., N, d) in x's dtype; the rotation is computed in the
        promoted dtype of x and the tables (fp32 tables rotate a half
        precision x in fp32).

    Raises:
        ValueError: x has fewer than H*W tokens or another channel count.
    """
    patches, dims = rope.sin.shape
    N, d = x.shape[-2:]
    if N < patches or d != dims or d % 2:
        raise ValueError(
            f'RoPE tables for {patches} patches x {dims} channels do not fit '
            f'q/k with {N} tokens x {d} channels; build them for this '
            'grid and head width.'
        )
    prefix, grid = x[..., : N - patches, :], x[..., N - patches :, :]
    rotated = grid * rope.cos + rotate_pairs(grid, rope.half) * rope.sin
    return torch.cat((prefix, rotated.to(x.dtype)), dim=-2)
