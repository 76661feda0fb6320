"""MHLA's spatial blocks: the s x s block grid over the H x W patches
(padded at the bottom/right when s does not divide a side) and the
"linear" init of the block-mixing matrix."""

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def mhla_linear_mixing(blocks_per_side: int) -> Tensor:
    """The "linear" init of the block-mixing matrix.

    m_ij = 1 - dist(c_i, c_j) / max dist over block centres, each column
    normalised to sum to 1. For 2 x 2 blocks: 0.6306 on the diagonal, 0.1847
    between edge neighbours and 0 between diagonal neighbours.

    Args:
        blocks_per_side (int): s >= 2; the matrix is (s^2, s^2).

    Returns:
        Tensor: (M, M) float32.
    """
    if blocks_per_side < 2:
        raise ValueError(
            'The linear mixing init needs blocks_per_side >= 2, '
            f'got {blocks_per_side}.'
        )
    rows, cols = torch.meshgrid(
        torch.arange(blocks_per_side),
        torch.arange(blocks_per_side),
        indexing='ij',
    )
    centres = torch.stack([rows.flatten(), cols.flatten()], 1).double()
    dist = torch.cdist(centres, centres)
    mixing = 1 - dist / dist.max()
    return (mixing / mixing.sum(0, keepdim=True)).float()


def _blocks_per_side(mixing):
    side = math.isqrt(mixing.shape[0])
    if mixing.shape != (side**2, side**2):
        raise ValueError(
            'The mixing matrix must be (M, M) with M a square '
            f'(s x s blocks), got {tuple(mixing.shape)}.'
        )
    return side


def _block_shape(hw_shape, side):
    H, W = hw_shape
    return -(-H // side), -(-W // side)


def _to_blocks(x, hw_shape, side):
    """(B, h, H*W, d) -> (B, h, M, L, d), zero-padding the grid to side*bh x
    side*bw (L = bh*bw tokens per block, row-major inside each block)."""
    B, h, _, d = x.shape
    H, W = hw_shape
    bh, bw = _block_shape(hw_shape, side)
    x = x.reshape(B, h, H, W, d)
    if (side * bh, side * bw) != (H, W):
        x = F.pad(x, (0, 0, 0, side * bw - W, 0, side * bh - H))
    x = x.reshape(B, h, side, bh, side, bw, d).transpose(3, 4)
    return x.reshape(B, h, side * side, bh * bw, d)


def _from_blocks(x, hw_shape, side):
    """Inverse of :func:`_to_blocks`, dropping the padded tokens."""
    B, h, _, _, d = x.shape
    H, W = hw_shape
    bh, bw = _block_shape(hw_shape, side)
    x = x.reshape(B, h, side, side, bh, bw, d).transpose(3, 4)
    x = x.reshape(B, h, side * bh, side * bw, d)[:, :, :H, :W]
    return x.reshape(B, h, H * W, d)


def mhla_block_index(
    hw_shape: tuple[int, int],
    blocks_per_side: int,
    device: torch.device | None = None,
) -> Tensor:
    """Block of every patch token: (H*W,) long, row-major block order."""
    H, W = hw_shape
    bh, bw = _block_shape(hw_shape, blocks_per_side)
    rows = torch.arange(H, device=device) // bh
    cols = torch.arange(W, device=device) // bw
    return (rows[:, None] * blocks_per_side + cols[None, :]).flatten()
