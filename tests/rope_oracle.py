"""Rotary position embedding written out with explicit float64 rotation
matrices: the oracle of the RoPE tests."""

import math

import torch

from mmlvit.ops.common.rope import RopeTables


def random_angles(patches, d, seed=0):
    """Per-pair angles (patches, d/2) in [0, 7)."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(patches, d // 2, generator=g, dtype=torch.float64) * 7


def tables(angles, half):
    """RopeTables laid out as ``half`` says from per-pair angles (P, d/2)."""
    if half:
        a = torch.cat((angles, angles), -1)
    else:
        a = angles.repeat_interleave(2, -1)
    return RopeTables(a.sin(), a.cos(), half)


def angles_of(rope):
    """Per-pair angles (P, d/2) back from float64 tables."""
    d = rope.sin.shape[1]
    pairs = slice(0, d // 2) if rope.half else slice(0, d, 2)
    return torch.atan2(rope.sin[:, pairs], rope.cos[:, pairs])


def rotation_matrix(angles, half):
    """(d, d) matrix turning each pair by its angle: pairs (2i, 2i+1)
    interleaved, (i, i + d/2) with ``half``."""
    d = 2 * angles.numel()
    R = torch.zeros(d, d, dtype=torch.float64)
    for i, a in enumerate(angles.tolist()):
        x, y = (i, i + d // 2) if half else (2 * i, 2 * i + 1)
        R[x, x], R[x, y] = math.cos(a), -math.sin(a)
        R[y, x], R[y, y] = math.sin(a), math.cos(a)
    return R


def rotate(x, rope):
    """x (..., N, d): the last P tokens multiplied by their rotation
    matrices one by one, the prefix unchanged."""
    angles = angles_of(rope)
    P = angles.shape[0]
    out = x.clone()
    prefix = x.shape[-2] - P
    for p in range(P):
        R = rotation_matrix(angles[p], rope.half)
        out[..., prefix + p, :] = x[..., prefix + p, :] @ R.T
    return out
