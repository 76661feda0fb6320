"""Triton kernels of the fused non-causal linear attentions.

One head of (N tokens, d_k key width, d_v value width) per program row
``bh``; tensors are addressed through their strides, so q, k, v may be
views of a ``qkv`` projection and nothing is copied. ``MODE`` selects the
operator (see :mod:`.function`):

- 0, 1, 2: phi(x) = elu(x) + 1, relu(x) or x, and
  o = phi(q) S / (phi(q) . z + eps)
- 3: InLine (identity phi), o = (s/N) (q S - (q . z) v_bar) + v_bar with
  v_bar = z_v / N

with S = phi(k)^T v (d_k x d_v), z = phi(k)^T 1 and z_v = v^T 1. Feature
maps, states, normalisers and every sum are fp32 in registers, and the
products run on fp32 tiles ('tf32' tensor-core precision for 16-bit inputs,
'ieee' for fp32 ones); q, k, v and the outputs keep the input dtype.
Token tiles are ``BLOCK_N`` rows; widths are padded to the powers of two
``BLOCK_K`` / ``BLOCK_V`` (>= 16, as ``tl.dot`` needs) and masked.
"""

import triton
import triton.language as tl

ELU, RELU, IDENTITY, INLINE = 0, 1, 2, 3


@triton.jit
def _phi(x, MODE: tl.constexpr):
    """The feature map on an fp32 tile."""
    if MODE == 0:
        return tl.where(x > 0, x + 1.0, tl.exp(x))
    elif MODE == 1:
        return tl.maximum(x, 0.0)
    else:
        return x


@triton.jit
def _phi_tile(x, rows, cols, N, D, MODE: tl.constexpr):
    """phi of a loaded tile, zero in its padding (elu + 1 is 1 at 0)."""
    inside = (rows[:, None] < N) & (cols[None, :] < D)
    return tl.where(inside, _phi(x, MODE), 0.0)


@triton.jit
def _phi_grad(x, MODE: tl.constexpr):
    """d phi / dx on an fp32 tile."""
    if MODE == 0:
        return tl.where(x > 0, 1.0, tl.exp(x))
    elif MODE == 1:
        return tl.where(x > 0, 1.0, 0.0)
    else:
        return tl.full(x.shape, 1.0, tl.float32)


@triton.jit
def _tile(ptr, stride_b, stride_h, stride_n, bh, H, rows, cols, N, D):
    """Load the (rows, cols) tile of head ``bh`` as fp32, zero outside."""
    b = bh // H
    h = bh % H
    offsets = (
        b.to(tl.int64) * stride_b
        + h.to(tl.int64) * stride_h
        + rows[:, None].to(tl.int64) * stride_n
        + cols[None, :]
    )
    mask = (rows[:, None] < N) & (cols[None, :] < D)
    return tl.load(ptr + offsets, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _store(ptr, stride_b, stride_h, stride_n, bh, H, rows, cols, N, D, x):
    """Store the fp32 tile ``x`` into head ``bh`` in the pointer's dtype."""
    b = bh // H
    h = bh % H
    offsets = (
        b.to(tl.int64) * stride_b
        + h.to(tl.int64) * stride_h
        + rows[:, None].to(tl.int64) * stride_n
        + cols[None, :]
    )
    mask = (rows[:, None] < N) & (cols[None, :] < D)
    tl.store(ptr + offsets, x.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr):
    """a @ b of fp32 tiles at ``PRECISION`` ('tf32' on the tensor cores,
    'ieee' for fp32 inputs), fp32 accumulation."""
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def state_kernel(
    k_ptr, v_ptr, s_ptr, z_ptr, zv_ptr,
    skb, skh, skn, svb, svh, svn,
    H, N, DK, DV, tiles_per_split,
    MODE: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """Partial sums of one token range: grid (B*H, splits).

    Writes S (BLOCK_K, BLOCK_V), z (BLOCK_K) and z_v (BLOCK_V) of split
    ``pid_1`` to ``s_ptr[bh, split]`` etc. (fp32, contiguous); the caller
    adds the splits up.
    """
    bh = tl.program_id(0)
    split = tl.program_id(1)
    splits = tl.num_programs(1)
    ck = tl.arange(0, BLOCK_K)
    cv = tl.arange(0, BLOCK_V)
    s = tl.zeros((BLOCK_K, BLOCK_V), tl.float32)
    z = tl.zeros((BLOCK_K,), tl.float32)
    zv = tl.zeros((BLOCK_V,), tl.float32)
    for t in range(tiles_per_split):
        rows = (split * tiles_per_split + t) * BLOCK_N + tl.arange(0, BLOCK_N)
        k = _tile(k_ptr, skb, skh, skn, bh, H, rows, ck, N, DK)
        v = _tile(v_ptr, svb, svh, svn, bh, H, rows, cv, N, DV)
        phi_k = _phi_tile(k, rows, ck, N, DK, MODE)
        s += _dot(tl.trans(phi_k), v, PRECISION)
        z += tl.sum(phi_k, axis=0)
        if MODE == 3:
            zv += tl.sum(v, axis=0)
    base = (bh * splits + split).to(tl.int64)
    tl.store(
        s_ptr + base * BLOCK_K * BLOCK_V + ck[:, None] * BLOCK_V + cv[None, :],
        s,
    )
    tl.store(z_ptr + base * BLOCK_K + ck, z)
    tl.store(zv_ptr + base * BLOCK_V + cv, zv)


@triton.jit
def _load_state(
    s_ptr, z_ptr, zv_ptr, bh, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr
):
    ck = tl.arange(0, BLOCK_K)
    cv = tl.arange(0, BLOCK_V)
    base = bh.to(tl.int64)
    s = tl.load(
        s_ptr + base * BLOCK_K * BLOCK_V + ck[:, None] * BLOCK_V + cv[None, :]
    )
    z = tl.load(z_ptr + base * BLOCK_K + ck)
    zv = tl.load(zv_ptr + base * BLOCK_V + cv)
    return s, z, zv


@triton.jit
def output_kernel(
    q_ptr, o_ptr, s_ptr, z_ptr, zv_ptr,
    sqb, sqh, sqn, sob, soh, son,
    H, N, DK, DV, eps, alpha,
    MODE: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """o for one token tile: grid (B*H, cdiv(N, BLOCK_N)).

    ``alpha`` is s/N for InLine (unused otherwise). The state is fp32 and so
    is every product: a key sum over many tokens need not fit a 16-bit
    type.
    """
    bh = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ck = tl.arange(0, BLOCK_K)
    cv = tl.arange(0, BLOCK_V)
    s, z, zv = _load_state(s_ptr, z_ptr, zv_ptr, bh, BLOCK_K, BLOCK_V)
    q = _tile(q_ptr, sqb, sqh, sqn, bh, H, rows, ck, N, DK)
    phi_q = _phi_tile(q, rows, ck, N, DK, MODE)
    num = _dot(phi_q, s, PRECISION)
    qz = tl.sum(phi_q * z[None, :], axis=1)
    if MODE == 3:
        v_bar = zv / N
        o = alpha * (num - qz[:, None] * v_bar[None, :]) + v_bar[None, :]
    else:
        o = num / (qz + eps)[:, None]
    _store(o_ptr, sob, soh, son, bh, H, rows, cv, N, DV, o)


@triton.jit
def query_grad_kernel(
    q_ptr, do_ptr, dq_ptr, s_ptr, z_ptr, zv_ptr, ds_ptr, dz_ptr, dzv_ptr,
    sqb, sqh, sqn, sdob, sdoh, sdon, sdqb, sdqh, sdqn,
    H, N, DK, DV, eps, alpha, tiles_per_split,
    MODE: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """dq over one token range, and the range's partial gradients of the
    state (dS, dz, dz_v): grid (B*H, splits), partials as in
    :func:`state_kernel`.

    Kernel modes, with den = phi(q) . z + eps and o = phi(q) S / den:
    d num = do / den, d den = -(do . o) / den,
    d phi(q) = d num S^T + d den z, dS += phi(q)^T d num, dz += phi(q) d den.
    InLine: dq = alpha (do S^T - (do . v_bar) z), dS += alpha q^T do,
    dz -= alpha (do . v_bar) q, dz_v += do (1 - alpha q . z) / N.
    """
    bh = tl.program_id(0)
    split = tl.program_id(1)
    splits = tl.num_programs(1)
    ck = tl.arange(0, BLOCK_K)
    cv = tl.arange(0, BLOCK_V)
    s, z, zv = _load_state(s_ptr, z_ptr, zv_ptr, bh, BLOCK_K, BLOCK_V)
    s_t = tl.trans(s)
    ds = tl.zeros((BLOCK_K, BLOCK_V), tl.float32)
    dz = tl.zeros((BLOCK_K,), tl.float32)
    dzv = tl.zeros((BLOCK_V,), tl.float32)
    for t in range(tiles_per_split):
        rows = (split * tiles_per_split + t) * BLOCK_N + tl.arange(0, BLOCK_N)
        q = _tile(q_ptr, sqb, sqh, sqn, bh, H, rows, ck, N, DK)
        do = _tile(do_ptr, sdob, sdoh, sdon, bh, H, rows, cv, N, DV)
        phi_q = _phi_tile(q, rows, ck, N, DK, MODE)
        qz = tl.sum(phi_q * z[None, :], axis=1)
        if MODE == 3:
            v_bar = zv / N
            do_v = tl.sum(do * v_bar[None, :], axis=1)
            dq = alpha * (
                _dot(do, s_t, PRECISION) - do_v[:, None] * z[None, :]
            )
            ds += alpha * _dot(tl.trans(phi_q), do, PRECISION)
            dz -= alpha * tl.sum(phi_q * do_v[:, None], axis=0)
            dzv += tl.sum(do * (1.0 - alpha * qz)[:, None], axis=0) / N
        else:
            den = qz + eps
            o = _dot(phi_q, s, PRECISION) / den[:, None]
            d_num = do / den[:, None]
            d_den = -tl.sum(do * o, axis=1) / den
            d_phi = _dot(d_num, s_t, PRECISION)
            dq = (d_phi + d_den[:, None] * z[None, :]) * _phi_grad(q, MODE)
            ds += _dot(tl.trans(phi_q), d_num, PRECISION)
            dz += tl.sum(phi_q * d_den[:, None], axis=0)
        _store(dq_ptr, sdqb, sdqh, sdqn, bh, H, rows, ck, N, DK, dq)
    base = (bh * splits + split).to(tl.int64)
    tl.store(
        ds_ptr
        + base * BLOCK_K * BLOCK_V
        + ck[:, None] * BLOCK_V
        + cv[None, :],
        ds,
    )
    tl.store(dz_ptr + base * BLOCK_K + ck, dz)
    tl.store(dzv_ptr + base * BLOCK_V + cv, dzv)


@triton.jit
def key_value_grad_kernel(
    k_ptr, v_ptr, dk_ptr, dv_ptr, ds_ptr, dz_ptr, dzv_ptr,
    skb, skh, skn, svb, svh, svn,
    sdkb, sdkh, sdkn, sdvb, sdvh, sdvn,
    H, N, DK, DV,
    MODE: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    """dk and dv of one token tile from the state gradients: grid
    (B*H, cdiv(N, BLOCK_N)).

    d phi(k) = v dS^T + dz, dk = d phi(k) phi'(k), dv = phi(k) dS + dz_v.
    """
    bh = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ck = tl.arange(0, BLOCK_K)
    cv = tl.arange(0, BLOCK_V)
    ds, dz, dzv = _load_state(ds_ptr, dz_ptr, dzv_ptr, bh, BLOCK_K, BLOCK_V)
    k = _tile(k_ptr, skb, skh, skn, bh, H, rows, ck, N, DK)
    v = _tile(v_ptr, svb, svh, svn, bh, H, rows, cv, N, DV)
    d_phi = _dot(v, tl.trans(ds), PRECISION) + dz[None, :]
    dk = d_phi * _phi_grad(k, MODE)
    phi_k = _phi_tile(k, rows, ck, N, DK, MODE)
    dv = _dot(phi_k, ds, PRECISION) + dzv[None, :]
    _store(dk_ptr, sdkb, sdkh, sdkn, bh, H, rows, ck, N, DK, dk)
    _store(dv_ptr, sdvb, sdvh, sdvn, bh, H, rows, cv, N, DV, dv)
