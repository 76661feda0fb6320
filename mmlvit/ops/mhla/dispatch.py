"""Multi-head linear attention (MHLA, Zhang et al. ICLR 2026).

ReLU-kernel linear attention whose key-value summaries are formed per
spatial block and mixed across blocks by a learned matrix W (M x M):

    S_b = sum_{j in b} phi(k_j)^T v_j,    z_b = sum_{j in b} phi(k_j)
    o_t = phi(q_t) sum_b W[i, b] S_b / (phi(q_t) . sum_b W[i, b] z_b + eps)

for a query t in block i, phi(x) = relu(x) + eps. The H x W patch grid is cut
into an s x s grid of blocks (M = s^2, row-major) of side ceil(H/s) x
ceil(W/s); when s does not divide a side the grid is zero-padded at the
bottom/right and the padded tokens are left out of every S_b and z_b.
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..common.dispatch import use_fused
from ..common.precision import fp32_accumulation

MHLA_EPS = 1e-6


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


def _kernel(x):
    return torch.relu(x) + MHLA_EPS


def mhla_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mixing: Tensor,
    hw_shape: tuple[int, int],
    backend: str = 'auto',
) -> Tensor:
    """Block-mixed ReLU linear attention in O(N) time and memory.

    Two paths compute it: fused Triton kernels
    (:func:`mmlvit.ops.common.linear_function.fused_mhla_attention`; CUDA,
    fp32/bf16/fp16: each block's summary in fp32 registers, q, k, v read in
    their dtype through their strides, no padded or blocked copies) and
    :func:`mhla_attention_reference` (PyTorch, any device).

    Args:
        q, k, v (Tensor): (B, h, N, d), N = H*W patches in raster order (no
            class token).
        mixing (Tensor): (M, M) block-mixing matrix W; ``W[i, b]`` weighs
            block b's summary for queries in block i. M = s^2.
        hw_shape (tuple[int, int]): Patch grid (H, W).
        backend (str): ``'auto'`` (fused on CUDA, the reference elsewhere
            and while exporting), ``'triton'`` or ``'torch'``.

    Returns:
        Tensor: (B, h, N, d) attention output (before the value conv), in
        the dtype of ``q``.
    """
    _blocks_per_side(mixing)
    if use_fused(backend, q, k, v):
        from ..common.linear_function import fused_mhla_attention

        return fused_mhla_attention(q, k, v, mixing, hw_shape, MHLA_EPS)
    return mhla_attention_reference(q, k, v, mixing, hw_shape)


@fp32_accumulation(result_dtype_of='q')
def mhla_attention_reference(
    q: Tensor, k: Tensor, v: Tensor, mixing: Tensor, hw_shape: tuple[int, int]
) -> Tensor:
    """:func:`mhla_attention` in PyTorch ops: summaries and normalisers in
    float32 (or float64 for float64 inputs) with autocast off; the result is
    cast back to ``q.dtype``. Shapes as there.
    """
    side = _blocks_per_side(mixing)
    q_blocks = _to_blocks(_kernel(q), hw_shape, side)
    # Pad after the kernel: padded keys are exactly 0 and drop out.
    k_blocks = _to_blocks(_kernel(k), hw_shape, side)
    v_blocks = _to_blocks(v, hw_shape, side)
    kv = k_blocks.transpose(-2, -1) @ v_blocks  # (B, h, M, d, d)
    k_sum = k_blocks.sum(-2)  # (B, h, M, d)
    kv = torch.einsum('ij,bhjde->bhide', mixing, kv)
    k_sum = torch.einsum('ij,bhjd->bhid', mixing, k_sum)
    numerator = q_blocks @ kv  # (B, h, M, L, d)
    denominator = q_blocks @ k_sum.unsqueeze(-1) + MHLA_EPS
    return _from_blocks(numerator / denominator, hw_shape, side)


@fp32_accumulation()
def mhla_attention_map(
    q: Tensor, k: Tensor, mixing: Tensor, hw_shape: tuple[int, int]
) -> Tensor:
    """The N x N map that :func:`mhla_attention` applies to the values.

    A_tj = W[i(t), b(j)] phi(q_t) . phi(k_j) / den_t, with den_t the
    normaliser of the linear form, so ``A @ v == mhla_attention(q, k, v)``.
    Materialises (B, h, N, N): for analysis only.

    Args:
        q, k (Tensor): (B, h, N, d), N = H*W.
        mixing (Tensor): (M, M).
        hw_shape (tuple[int, int]): Patch grid (H, W).

    Returns:
        Tensor: (B, h, N, N) in float32 (float64 for float64 inputs).
    """
    side = _blocks_per_side(mixing)
    block = mhla_block_index(hw_shape, side, device=q.device)
    weights = mixing[block[:, None], block[None, :]]
    scores = _kernel(q) @ _kernel(k).transpose(-2, -1)
    scores = scores * weights
    return scores / (scores.sum(-1, keepdim=True) + MHLA_EPS)
