"""Axial 2-D rotary position tables for the patch grid (no weights).

Each head's d channels form d/2 rotated pairs: the first d/4 pairs turn with
the patch's row coordinate, the last d/4 with its column coordinate, at
frequencies f_0 .. f_{d/4-1}. The tables (:class:`RopeTables`, applied by
:func:`mmlvit.ops.common.rope.apply_rope`) are built for the grid of every
forward, so any resolution works and nothing enters the state dict.

Types (``rope_cfg['type']``):

- ``'eva02'`` (EVA-02, arXiv 2303.11331; timm's ``RotaryEmbeddingCat``):
  coordinates are patch indices plus ``grid_offset``, rescaled to the
  pre-training grid ``ref_feat_shape`` when one is given
  (``t * ref / size``); ``f_i = temperature^(-i / (d/4))``; interleaved
  pairs.
- ``'dinov3'`` (DINOv3, arXiv 2508.10104; timm's
  ``RotaryEmbeddingDinoV3``): patch centres ``(t + 0.5 + grid_offset)``
  divided by the grid size (``normalize_coords``: each axis by its own
  size, or both by the min or max side) and mapped to [-1, 1];
  ``f_i = 2 pi / period_i`` with ``period_i = temperature^(i / (d/4))``,
  or log-spaced from ``min_period`` to ``max_period``; half-split pairs.
"""

import math

import torch
import torch.nn as nn

from mmlvit.ops.common.rope import RopeTables

from ..attentions.base import registered_operators

ROPE_TYPES = ('eva02', 'dinov3')


class AxialRope(nn.Module):
    """Builds the (H*W, d) sin and cos tables of one RoPE type.

    Args:
        head_dims (int): Channels d of a head; a multiple of 4.
        type (str): One of :data:`ROPE_TYPES`.
        temperature (float, optional): Frequency base. Defaults to 10000
            for ``'eva02'`` and 100 for ``'dinov3'``.
        ref_feat_shape (tuple[int, int], optional): ``'eva02'`` only: the
            pre-training grid coordinates are rescaled to.
        grid_offset (float): Added to the coordinates. Defaults to 0.
        normalize_coords (str): ``'dinov3'`` only: ``'separate'``,
            ``'min'`` or ``'max'``. Defaults to 'separate'.
        min_period, max_period (float, optional): ``'dinov3'`` only:
            log-spaced periods instead of ``temperature``.
        rotate_half (bool, optional): Half-split pairs instead of
            interleaved ones. Defaults to the type's own layout.
    """

    def __init__(
        self,
        head_dims,
        type='eva02',
        temperature=None,
        ref_feat_shape=None,
        grid_offset=0.0,
        normalize_coords='separate',
        min_period=None,
        max_period=None,
        rotate_half=None,
    ):
        super().__init__()
        if type not in ROPE_TYPES:
            raise ValueError(
                f'Unknown rope_cfg type {type!r}; choose from {ROPE_TYPES}.'
            )
        if head_dims % 4:
            raise ValueError(
                f'Axial RoPE needs a head width divisible by 4 (two axes, '
                f'pairs of channels), got {head_dims}.'
            )
        if type == 'eva02' and (min_period or max_period):
            raise ValueError("min_period/max_period are 'dinov3' options.")
        if type == 'dinov3' and ref_feat_shape is not None:
            raise ValueError("ref_feat_shape is an 'eva02' option.")
        if normalize_coords not in ('separate', 'min', 'max'):
            raise ValueError(
                f'normalize_coords must be separate, min or max, got '
                f'{normalize_coords!r}.'
            )
        self.head_dims = head_dims
        self.type = type
        default_temperature = 10000.0 if type == 'eva02' else 100.0
        self.temperature = temperature or default_temperature
        self.ref_feat_shape = (
            None if ref_feat_shape is None else tuple(ref_feat_shape)
        )
        self.grid_offset = grid_offset
        self.normalize_coords = normalize_coords
        self.min_period, self.max_period = min_period, max_period
        self.half = type == 'dinov3' if rotate_half is None else rotate_half

    def axis_angles(self, coords: torch.Tensor) -> torch.Tensor:
        """Angles of the d/4 pairs of one axis at coordinates (...,):
        (..., d/4), computed as the reference implementations do (EVA-02:
        ``t * f``, DINOv3: ``2 pi t / period``)."""
        bands = self.head_dims // 4
        exponents = torch.arange(bands, dtype=coords.dtype) / bands
        if self.type == 'eva02':
            return coords[..., None] * (1.0 / self.temperature**exponents)
        if self.min_period is not None and self.max_period is not None:
            ratio = self.max_period / self.min_period
            steps = torch.linspace(0, 1, bands, dtype=coords.dtype)
            periods = self.min_period * ratio**steps
        else:
            periods = self.temperature**exponents
        return 2 * math.pi * coords[..., None] / periods

    def coordinates(self, hw_shape, dtype=torch.float32):
        """Row and column coordinate of each axis: ((H,), (W,))."""
        sizes = tuple(hw_shape)
        if self.type == 'eva02':
            coords = [
                torch.arange(s, dtype=dtype) + self.grid_offset for s in sizes
            ]
            if self.ref_feat_shape is not None:
                coords = [
                    t / s * r
                    for t, s, r in zip(coords, sizes, self.ref_feat_shape)
                ]
            return coords
        if self.normalize_coords == 'separate':
            denominators = sizes
        else:
            pick = min if self.normalize_coords == 'min' else max
            denominators = (pick(sizes),) * 2
        return [
            2 * ((torch.arange(s, dtype=dtype) + 0.5 + self.grid_offset) / n)
            - 1
            for s, n in zip(sizes, denominators)
        ]

    def forward(
        self, hw_shape, device=None, dtype=torch.float32
    ) -> RopeTables:
        """Tables for an (H, W) grid, each (H*W, d) in ``dtype``."""
        H, W = hw_shape
        rows, cols = self.coordinates(hw_shape, dtype)
        grid = torch.stack(torch.meshgrid(rows, cols, indexing='ij'), -1)
        angles = self.axis_angles(grid.reshape(H * W, 2)).flatten(1)
        if self.half:
            angles = torch.cat((angles, angles), dim=-1)
        else:
            angles = angles.repeat_interleave(2, dim=-1)
        angles = angles.to(device)
        return RopeTables(angles.sin(), angles.cos(), self.half)

    def extra_repr(self) -> str:
        return f'type={self.type!r}, head_dims={self.head_dims}'


def check_rope_support(attentions) -> None:
    """Raise a ValueError naming the operators that cannot take RoPE.

    Args:
        attentions (Iterable[BaseAttention]): One per layer.
    """
    refused = sorted(
        {type(a).__name__ for a in attentions if not a.supports_rope}
    )
    if refused:
        able = [
            name
            for name, cls in registered_operators().items()
            if cls.supports_rope
        ]
        raise ValueError(
            f'rope_cfg is set but {", ".join(refused)} cannot apply rotary '
            'position embedding (supports_rope is False). Use an operator '
            f'that does ({", ".join(able)}) or drop rope_cfg.'
        )
