"""The pieces of the fused linear attentions' kernels
(:mod:`.linear_kernels`, whose docstring gives the notation): feature maps,
segment geometry, state offsets, a token range's state and outputs."""

import triton
import triton.language as tl

from .tiles import _dot, _range_tokens, _store, _tile
from .triton_math import exp


@triton.jit
def _phi(x, MODE: tl.constexpr):
    """The feature map on an fp32 tile."""
    if MODE == 0:
        return tl.where(x > 0, x + 1.0, exp(x))
    elif MODE == 1:
        return tl.maximum(x, 0.0)
    elif MODE == 4:
        return tl.maximum(x, 0.0) + 1e-6
    else:
        return x


@triton.jit
def _phi_grad(x, MODE: tl.constexpr):
    """d phi / dx on an fp32 tile."""
    if MODE == 0:
        return tl.where(x > 0, 1.0, exp(x))
    elif MODE == 1 or MODE == 4:
        return tl.where(x > 0, 1.0, 0.0)
    else:
        return tl.full(x.shape, 1.0, tl.float32)


@triton.jit
def _tokens(
    seg, idx, seg_len, grid_h, grid_w, block_h, block_w, side,
    BLOCKED: tl.constexpr,
):  # fmt: skip
    """Token indices (into the N tokens) of positions ``idx`` of segment
    ``seg``, and which of them exist."""
    if BLOCKED:
        r = (seg // side) * block_h + idx // block_w
        c = (seg % side) * block_w + idx % block_w
        valid = (idx < seg_len) & (r < grid_h) & (c < grid_w)
        return r * grid_w + c, valid
    else:
        return idx, idx < seg_len


@triton.jit
def _phi_tile(x, valid, cols, D, MODE: tl.constexpr):
    """phi of a tile loaded as zero in its padding, zero there too: a
    select for ELU and MHLA, whose phi(0) is not 0, and for ReLU, whose
    is (fewer instructions and registers; none for identity and InLine,
    which it would slow)."""
    if MODE == 2 or MODE == 3:
        return x
    inside = valid[:, None] & (cols[None, :] < D)
    return tl.where(inside, _phi(x, MODE), 0.0)


@triton.jit
def _state_offsets(index, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr):
    """Offsets of state ``index`` in the S, z and z_v buffers."""
    ck = tl.arange(0, BLOCK_K)
    cv = tl.arange(0, BLOCK_V)
    base = index.to(tl.int64)
    s = base * BLOCK_K * BLOCK_V + ck[:, None] * BLOCK_V + cv[None, :]
    return s, base * BLOCK_K + ck, base * BLOCK_V + cv


@triton.jit
def _split_program(splits):
    """(head, segment, split, the segment's state index) of this program
    of a launch over token ranges: grid (B*H, SEGS * splits)."""
    bh = tl.program_id(0)
    seg = tl.program_id(1) // splits
    segs = tl.num_programs(1) // splits
    return bh, seg, tl.program_id(1) % splits, bh * segs + seg


@triton.jit
def _tile_program(
    tiles_per_seg, seg_len, grid_h, grid_w, block_h, block_w, side,
    BLOCKED: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """(head, token indices, which exist, the segment's state index) of
    this program of a launch over tiles: grid (B*H, SEGS * tiles_per_seg)."""
    bh = tl.program_id(0)
    seg = tl.program_id(1) // tiles_per_seg
    idx = (tl.program_id(1) % tiles_per_seg) * BLOCK_N + tl.arange(0, BLOCK_N)
    tokens, valid = _tokens(
        seg, idx, seg_len, grid_h, grid_w, block_h, block_w, side, BLOCKED
    )
    segs = tl.num_programs(1) // tiles_per_seg
    return bh, tokens, valid, bh * segs + seg


@triton.jit
def _range_state(
    k_ptr, v_ptr, skb, skh, skn, svb, svh, svn, bh,
    H, DK, DV, seg, seg_len, grid_h, grid_w, block_h, block_w, side,
    split, tiles_per_split,
    MODE: tl.constexpr, BLOCKED: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """S, z, z_v (fp32) of token range ``split`` of segment ``seg`` of
    head ``bh``: ``tiles_per_split`` tiles.

    z and z_v add up whole tiles, summed over their tokens once after the
    loop: a tile's sum over its tokens is a reduction across the
    program's warps (shuffles and barriers), too costly once a tile."""
    ck = tl.arange(0, BLOCK_K)
    cv = tl.arange(0, BLOCK_V)
    s = tl.zeros((BLOCK_K, BLOCK_V), tl.float32)
    z = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
    zv = tl.zeros((BLOCK_N, BLOCK_V), tl.float32)
    for t in range(tiles_per_split):
        idx, _ = _range_tokens(split, t, tiles_per_split, seg_len, BLOCK_N)
        tokens, valid = _tokens(
            seg, idx, seg_len, grid_h, grid_w, block_h, block_w, side, BLOCKED
        )
        k = _tile(k_ptr, skb, skh, skn, bh, H, tokens, valid, ck, DK)
        v = _tile(v_ptr, svb, svh, svn, bh, H, tokens, valid, cv, DV)
        phi_k = _phi_tile(k, valid, ck, DK, MODE)
        s += _dot(tl.trans(phi_k), v, PRECISION)
        z += phi_k
        if MODE == 3:
            zv += v
    # z_v is InLine's only: no sum of a zero tile for the others.
    zv = tl.sum(zv, axis=0) if MODE == 3 else tl.zeros((BLOCK_V,), tl.float32)
    return s, tl.sum(z, axis=0), zv


@triton.jit
def _tile_output(
    q, valid, s, z, zv, DK, seg_len, eps, alpha,
    MODE: tl.constexpr, PRECISION: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """o (fp32) of one fp32 query tile given its segment's state as
    :func:`_output_state` gives it (InLine's S - z v_bar^T; ``alpha`` =
    s/N, unused otherwise).

    The state is fp32 (a key sum over many tokens need not fit a 16-bit
    type); the kernel modes' normaliser q . z is summed in fp32 and
    inverted once a row."""
    phi_q = _phi_tile(q, valid, tl.arange(0, BLOCK_K), DK, MODE)
    num = _dot(phi_q, s, PRECISION)
    if MODE == 3:
        v_bar = zv / seg_len
        return alpha * num + v_bar[None, :]
    qz = tl.sum(phi_q * z[None, :], axis=1)
    return num * (1.0 / (qz + eps))[:, None]


@triton.jit
def _output_state(s, z, zv, seg_len, MODE: tl.constexpr):
    """The state the outputs read: S, or for InLine S - z v_bar^T, so that
    q S - (q . z) v_bar is one product (no sum over a query's channels),
    centred in fp32 before any rounding for the product."""
    if MODE == 3:
        return s - z[:, None] * (zv / seg_len)[None, :]
    return s


@triton.jit
def _range_outputs(
    q_ptr, o_ptr, sqb, sqh, sqn, sob, soh, son, bh, s, z, zv,
    H, DK, DV, seg, seg_len, grid_h, grid_w, block_h, block_w, side,
    split, tiles_per_split, eps, alpha,
    MODE: tl.constexpr, BLOCKED: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """Store o of token range ``split`` of segment ``seg`` of head ``bh``
    (``tiles_per_split`` tiles) given the segment's state."""
    ck = tl.arange(0, BLOCK_K)
    cv = tl.arange(0, BLOCK_V)
    s = _output_state(s, z, zv, seg_len, MODE)
    for t in range(tiles_per_split):
        idx, _ = _range_tokens(split, t, tiles_per_split, seg_len, BLOCK_N)
        tokens, valid = _tokens(
            seg, idx, seg_len, grid_h, grid_w, block_h, block_w, side, BLOCKED
        )
        q = _tile(q_ptr, sqb, sqh, sqn, bh, H, tokens, valid, ck, DK)
        o = _tile_output(
            q, valid, s, z, zv, DK, seg_len, eps, alpha,
            MODE, PRECISION, BLOCK_K,
        )  # fmt: skip
        _store(o_ptr, sob, soh, son, bh, H, tokens, valid, cv, DV, o)
