"""Fixed position embeddings of the patch grid."""

import torch
from torch import Tensor


def sincos_position_embedding(
    hw_shape: tuple[int, int],
    embed_dims: int,
    temperature: float = 10000.0,
    device: torch.device | None = None,
    dtype: torch.dtype | None = None,
) -> Tensor:
    """Fixed 2-D sine-cosine position embedding (MAE style), raster order.

    The patch at row ``r``, column ``c`` gets
    ``[sin(r w), cos(r w), sin(c w), cos(c w)]`` with the C/4 frequencies
    ``w_i = temperature ** (-i / (C / 4))``: half of the channels encode the
    row, half the column.

    Args:
        hw_shape (tuple[int, int]): Patch grid (H, W).
        embed_dims (int): C, a multiple of 4.
        temperature (float): Longest wavelength / (2 pi). Defaults to 1e4.
        device (torch.device, optional): Where to build it.
        dtype (torch.dtype, optional): Float type to compute it in.
            Defaults to float32.

    Returns:
        Tensor: (1, H*W, C) of ``dtype``.
    """
    if embed_dims % 4 != 0:
        raise ValueError(
            'A 2-D sin-cos position embedding needs embed_dims '
            f'divisible by 4, got {embed_dims}.'
        )
    H, W = hw_shape
    num_freqs = embed_dims // 4
    exponent = (
        torch.arange(num_freqs, device=device, dtype=dtype or torch.float32)
        / num_freqs
    )
    omega = temperature**-exponent
    rows = torch.arange(H, device=device, dtype=omega.dtype)
    rows = rows.repeat_interleave(W)
    cols = torch.arange(W, device=device, dtype=omega.dtype).repeat(H)
    row_angle = rows[:, None] * omega
    col_angle = cols[:, None] * omega
    return torch.cat(
        [row_angle.sin(), row_angle.cos(), col_angle.sin(), col_angle.cos()],
        dim=1,
    )[None]
