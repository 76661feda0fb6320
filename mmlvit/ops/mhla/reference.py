""":func:`~.dispatch.mhla_attention` in PyTorch: per-block summaries on
padded, blocked copies of the tokens, on any device."""

import torch
from torch import Tensor

from ..common.precision import fp32_accumulation
from .blocks import _blocks_per_side, _from_blocks, _to_blocks
from .naive import MHLA_EPS, _kernel


@fp32_accumulation(result_dtype_of='q')
def mhla_attention_reference(
    q: Tensor, k: Tensor, v: Tensor, mixing: Tensor, hw_shape: tuple[int, int]
) -> Tensor:
    """:func:`~.dispatch.mhla_attention` in PyTorch ops: summaries and
    normalisers in float32 (or float64 for float64 inputs) with autocast
    off; the result is cast back to ``q.dtype``. Shapes as there.
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
