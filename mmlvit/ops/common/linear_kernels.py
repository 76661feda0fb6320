"""Triton kernels of the fused non-causal linear attentions.

Each program row ``bh`` is one head of N tokens (d_k key width, d_v value
width); tensors are addressed through their strides, so q, k, v may be views
of a ``qkv`` projection and nothing is copied. A head's tokens form
``SEGS`` segments, each with its own state: the whole sequence (plain
attention, one segment) or, with ``BLOCKED``, the s x s spatial blocks of an
H x W grid (MHLA; block m covers rows [m // s * bh, ...) and columns
[m % s * bw, ...), tokens outside the grid are left out). ``MODE`` selects
the operator (see :mod:`.linear_function`):

- 0, 1, 2, 4: phi(x) = elu(x) + 1, relu(x), x or relu(x) + 1e-6 (MHLA), and
  o = phi(q) S / (phi(q) . z + eps)
- 3: InLine (identity phi), o = (s/N) (q S - (q . z) v_bar) + v_bar with
  v_bar = z_v / N, as (s/N) q (S - z v_bar^T) + v_bar

with S = phi(k)^T v (d_k x d_v), z = phi(k)^T 1 and z_v = v^T 1 over the
segment. Feature maps, states, normalisers and every sum are fp32 in
registers; products take fp32 tiles at 'ieee' precision (fp32 inputs) or
'tf32' (fp16 inputs), or their operands rounded to bf16 (bf16 inputs), and
accumulate in fp32; q, k, v and the outputs keep the input dtype. Token
tiles are ``BLOCK_N`` positions of a segment; widths are padded to the
powers of two ``BLOCK_K`` / ``BLOCK_V`` (>= 16, as ``tl.dot``
needs) and masked. States are stored fp32 and contiguous, (B*H, SEGS,
BLOCK_K, BLOCK_V), (B*H, SEGS, BLOCK_K), (B*H, SEGS, BLOCK_V); per-split
partials have an extra splits axis after SEGS.
"""

import triton
import triton.language as tl

from .linear_parts import (
    _output_state,
    _phi_grad,
    _phi_tile,
    _range_outputs,
    _range_state,
    _split_program,
    _state_offsets,
    _tile_program,
    _tokens,
)
from .tiles import _dot, _range_tokens, _store, _tile

ELU, RELU, IDENTITY, INLINE, MHLA = 0, 1, 2, 3, 4

# Sizes that vary between calls are not specialised on, so one compilation
# per mode, dtype and head width serves every batch, resolution and split;
# strides and the head widths DK, DV still are (a width that is a multiple
# of 16 lets token rows load as 16-byte vectors).
SIZES = [
    'H', 'seg_len', 'grid_h', 'grid_w', 'block_h', 'block_w', 'side',
]  # fmt: skip


@triton.jit(do_not_specialize=SIZES + ['splits', 'tiles_per_split'])
def state_kernel(
    k_ptr, v_ptr, s_ptr, z_ptr, zv_ptr,
    skb, skh, skn, svb, svh, svn,
    H, DK, DV, seg_len, grid_h, grid_w, block_h, block_w, side,
    splits, tiles_per_split,
    MODE: tl.constexpr, BLOCKED: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """S, z, z_v of one token range of one segment: grid
    (B*H, SEGS * splits); writes partial ``[bh, seg, split]``."""
    bh, seg, split, state = _split_program(splits)
    s, z, zv = _range_state(
        k_ptr, v_ptr, skb, skh, skn, svb, svh, svn, bh,
        H, DK, DV, seg, seg_len, grid_h, grid_w, block_h, block_w, side,
        split, tiles_per_split, MODE, BLOCKED, PRECISION,
        BLOCK_N, BLOCK_K, BLOCK_V,
    )  # fmt: skip
    offsets = _state_offsets(state * splits + split, BLOCK_K, BLOCK_V)
    tl.store(s_ptr + offsets[0], s)
    tl.store(z_ptr + offsets[1], z)
    tl.store(zv_ptr + offsets[2], zv)


@triton.jit(do_not_specialize=SIZES + ['splits', 'tiles_per_split'])
def output_kernel(
    q_ptr, o_ptr, s_ptr, z_ptr, zv_ptr,
    sqb, sqh, sqn, sob, soh, son,
    H, DK, DV, seg_len, grid_h, grid_w, block_h, block_w, side,
    splits, tiles_per_split, eps, alpha,
    MODE: tl.constexpr, BLOCKED: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """o over one token range of one segment, its state loaded once: grid
    (B*H, SEGS * splits)."""
    bh, seg, split, state = _split_program(splits)
    offsets = _state_offsets(state, BLOCK_K, BLOCK_V)
    s = tl.load(s_ptr + offsets[0])
    z = tl.load(z_ptr + offsets[1])
    zv = tl.load(zv_ptr + offsets[2])
    _range_outputs(
        q_ptr, o_ptr, sqb, sqh, sqn, sob, soh, son, bh, s, z, zv,
        H, DK, DV, seg, seg_len, grid_h, grid_w, block_h, block_w, side,
        split, tiles_per_split, eps, alpha, MODE, BLOCKED, PRECISION,
        BLOCK_N, BLOCK_K, BLOCK_V,
    )  # fmt: skip


@triton.jit(do_not_specialize=SIZES + ['tiles'])
def attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr,
    sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
    H, DK, DV, N, tiles, eps, alpha,
    MODE: tl.constexpr, PRECISION: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """A whole head in one program (one segment, the state of all N
    tokens, then every tile's output; the state never leaves registers):
    grid (B*H,)."""
    bh = tl.program_id(0)
    s, z, zv = _range_state(
        k_ptr, v_ptr, skb, skh, skn, svb, svh, svn, bh,
        H, DK, DV, 0, N, 0, 0, 0, 0, 0, 0, tiles,
        MODE, False, PRECISION, BLOCK_N, BLOCK_K, BLOCK_V,
    )  # fmt: skip
    _range_outputs(
        q_ptr, o_ptr, sqb, sqh, sqn, sob, soh, son, bh, s, z, zv,
        H, DK, DV, 0, N, 0, 0, 0, 0, 0, 0, tiles, eps, alpha,
        MODE, False, PRECISION, BLOCK_N, BLOCK_K, BLOCK_V,
    )  # fmt: skip


@triton.jit(do_not_specialize=SIZES + ['splits', 'tiles_per_split'])
def query_grad_kernel(
    q_ptr, do_ptr, dq_ptr, s_ptr, z_ptr, zv_ptr, ds_ptr, dz_ptr, dzv_ptr,
    sqb, sqh, sqn, sdob, sdoh, sdon, sdqb, sdqh, sdqn,
    H, DK, DV, seg_len, grid_h, grid_w, block_h, block_w, side,
    splits, tiles_per_split, eps, alpha,
    MODE: tl.constexpr, BLOCKED: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """dq over one token range of one segment, and the range's partial
    gradients of the segment's state (dS, dz, dz_v): grid
    (B*H, SEGS * splits), partials as in :func:`state_kernel`.

    Kernel modes, with den = phi(q) . z + eps and o = phi(q) S / den:
    d num = do / den, d den = -(do . o) / den,
    d phi(q) = d num S^T + d den z, dS += phi(q)^T d num, dz += phi(q) d den.
    InLine: dq = alpha do (S - z v_bar^T)^T, dS += alpha q^T do, and after
    the loop, from the range's dS and sum of do, dz = -dS v_bar (the sum
    of -alpha (do . v_bar) q) and dz_v = (sum do - dS^T z) / N (of do (1 -
    alpha q . z) / N): no sum over a token's channels in the loop.
    dz and dz_v add up whole tiles, as in :func:`_range_state`.
    """
    bh, seg, split, state = _split_program(splits)
    ck = tl.arange(0, BLOCK_K)
    cv = tl.arange(0, BLOCK_V)
    offsets = _state_offsets(state, BLOCK_K, BLOCK_V)
    s = tl.load(s_ptr + offsets[0])
    z = tl.load(z_ptr + offsets[1])
    zv = tl.load(zv_ptr + offsets[2])
    s_t = tl.trans(_output_state(s, z, zv, seg_len, MODE))
    ds = tl.zeros((BLOCK_K, BLOCK_V), tl.float32)
    dz = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
    dzv = tl.zeros((BLOCK_N, BLOCK_V), tl.float32)
    for t in range(tiles_per_split):
        idx, _ = _range_tokens(split, t, tiles_per_split, seg_len, BLOCK_N)
        tokens, valid = _tokens(
            seg, idx, seg_len, grid_h, grid_w, block_h, block_w, side, BLOCKED
        )
        q = _tile(q_ptr, sqb, sqh, sqn, bh, H, tokens, valid, ck, DK)
        do = _tile(do_ptr, sdob, sdoh, sdon, bh, H, tokens, valid, cv, DV)
        phi_q = _phi_tile(q, valid, ck, DK, MODE)
        if MODE == 3:
            dq = alpha * _dot(do, s_t, PRECISION)
            ds += _dot(tl.trans(phi_q), do, PRECISION)
            dzv += do
        else:
            inv_den = 1.0 / (tl.sum(phi_q * z[None, :], axis=1) + eps)
            o = _dot(phi_q, s, PRECISION) * inv_den[:, None]
            d_num = do * inv_den[:, None]
            d_den = -tl.sum(do * o, axis=1) * inv_den
            d_phi = _dot(d_num, s_t, PRECISION)
            dq = (d_phi + d_den[:, None] * z[None, :]) * _phi_grad(q, MODE)
            ds += _dot(tl.trans(phi_q), d_num, PRECISION)
            dz += phi_q * d_den[:, None]
        _store(dq_ptr, sdqb, sdqh, sdqn, bh, H, tokens, valid, ck, DK, dq)
    if MODE == 3:
        ds = alpha * ds
        dz = -tl.sum(ds * (zv / seg_len)[None, :], axis=1)
        dzv = tl.sum(dzv, axis=0) - tl.sum(ds * z[:, None], axis=0)
        dzv = dzv / seg_len
    else:  # (z_v is InLine's only)
        dz = tl.sum(dz, axis=0)
        dzv = tl.zeros((BLOCK_V,), tl.float32)
    offsets = _state_offsets(state * splits + split, BLOCK_K, BLOCK_V)
    tl.store(ds_ptr + offsets[0], ds)
    tl.store(dz_ptr + offsets[1], dz)
    tl.store(dzv_ptr + offsets[2], dzv)


@triton.jit(do_not_specialize=SIZES + ['tiles_per_seg'])
def key_value_grad_kernel(
    k_ptr, v_ptr, dk_ptr, dv_ptr, ds_ptr, dz_ptr, dzv_ptr,
    skb, skh, skn, svb, svh, svn,
    sdkb, sdkh, sdkn, sdvb, sdvh, sdvn,
    H, DK, DV, seg_len, grid_h, grid_w, block_h, block_w, side,
    tiles_per_seg,
    MODE: tl.constexpr, BLOCKED: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """dk and dv of one token tile of one segment from the gradients of
    its state: grid (B*H, SEGS * tiles).

    d phi(k) = v dS^T + dz, dk = d phi(k) phi'(k), dv = phi(k) dS + dz_v.
    """
    bh, tokens, valid, state = _tile_program(
        tiles_per_seg, seg_len, grid_h, grid_w, block_h, block_w, side,
        BLOCKED, BLOCK_N,
    )  # fmt: skip
    ck = tl.arange(0, BLOCK_K)
    cv = tl.arange(0, BLOCK_V)
    offsets = _state_offsets(state, BLOCK_K, BLOCK_V)
    ds = tl.load(ds_ptr + offsets[0])
    dz = tl.load(dz_ptr + offsets[1])
    dzv = tl.load(dzv_ptr + offsets[2])
    k = _tile(k_ptr, skb, skh, skn, bh, H, tokens, valid, ck, DK)
    v = _tile(v_ptr, svb, svh, svn, bh, H, tokens, valid, cv, DV)
    d_phi = _dot(v, tl.trans(ds), PRECISION) + dz[None, :]
    dk = d_phi * _phi_grad(k, MODE)
    phi_k = _phi_tile(k, valid, ck, DK, MODE)
    dv = _dot(phi_k, ds, PRECISION) + dzv[None, :]
    _store(dk_ptr, sdkb, sdkh, sdkn, bh, H, tokens, valid, ck, DK, dk)
    _store(dv_ptr, sdvb, sdvh, sdvn, bh, H, tokens, valid, cv, DV, dv)
