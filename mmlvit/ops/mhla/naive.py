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

import torch
from torch import Tensor

from ..common.precision import fp32_accumulation
from .blocks import _blocks_per_side, mhla_block_index

MHLA_EPS = 1e-6


def _kernel(x):
    return torch.relu(x) + MHLA_EPS


@fp32_accumulation()
def mhla_attention_map(
    q: Tensor, k: Tensor, mixing: Tensor, hw_shape: tuple[int, int]
) -> Tensor:
    """The N x N map that :func:`~.dispatch.mhla_attention` applies to the
    values.

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
