"""Triton kernels of the gated RMSNorm that follows GLA's scan.

A row is one token of one head: o (d,) of the scan's output and the
matching d channels z of the output gate. With r = (mean_j o_j^2 + eps)^-1/2,
o_hat = r o, a = w o_hat and silu(z) = z sigmoid(z):

- :func:`gated_norm_kernel`: y = a silu(z);
- :func:`gated_norm_grad_kernel`, given dy: dz = dy a silu'(z),
  d(o_hat) = dy silu(z) w, do = r (d(o_hat) - o_hat mean_j(d(o_hat)_j
  o_hat_j)), and per program the partial sums sum_rows dy silu(z) o_hat of
  dw.

A program takes ``BLOCK_N`` tokens of one head (``bh``); o, z, y and their
gradients are addressed through (batch, head, token) strides with unit
channel stride (the gate and y as (B, H, N, d) views of token-major
(B, N, H d) tensors), so nothing is copied. Every sum and product is fp32
in registers; tensors keep their dtypes, w is fp32 and the partial sums
fp32 (programs, BLOCK_D).
"""

import triton
import triton.language as tl

from ..common.linear_kernels import _store, _tile
from ..ttt.swiglu_kernels import _silu_terms

# Sizes that vary between calls are not specialised on; the head width D
# is (a multiple of 16: rows load as 16-byte vectors).
SIZES = ['H', 'N']


@triton.jit
def _rows(N, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """This program's head ``bh``, its tokens and which of them exist, and
    the channels."""
    tokens = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    return tl.program_id(1), tokens, tokens < N, tl.arange(0, BLOCK_D)


@triton.jit
def _normalised(
    o_ptr, sob, soh, son, w_ptr, bh, H, tokens, valid, cols, D, eps
):  # fmt: skip
    """(o_hat, r, w): the rows of o scaled to unit root mean square, the
    scales (BLOCK_N,), and w as an fp32 (BLOCK_D,) row, zero past D."""
    o = _tile(o_ptr, sob, soh, son, bh, H, tokens, valid, cols, D)
    r = 1.0 / tl.sqrt(tl.sum(o * o, 1) / D + eps)
    w = tl.load(w_ptr + cols, mask=cols < D, other=0.0).to(tl.float32)
    return o * r[:, None], r, w


@triton.jit(do_not_specialize=SIZES)
def gated_norm_kernel(
    o_ptr, z_ptr, w_ptr, y_ptr,
    sob, soh, son, szb, szh, szn, syb, syh, syn,
    H, N, D, eps,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    bh, tokens, valid, cols = _rows(N, BLOCK_N, BLOCK_D)
    o_hat, _, w = _normalised(
        o_ptr, sob, soh, son, w_ptr, bh, H, tokens, valid, cols, D, eps
    )
    z = _tile(z_ptr, szb, szh, szn, bh, H, tokens, valid, cols, D)
    silu, _ = _silu_terms(z)
    y = o_hat * w[None, :] * silu
    _store(y_ptr, syb, syh, syn, bh, H, tokens, valid, cols, D, y)


@triton.jit(do_not_specialize=SIZES)
def gated_norm_grad_kernel(
    o_ptr, z_ptr, w_ptr, dy_ptr, do_ptr, dz_ptr, dw_ptr,
    sob, soh, son, szb, szh, szn, syb, syh, syn,
    sdob, sdoh, sdon, sdzb, sdzh, sdzn,
    H, N, D, eps,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    bh, tokens, valid, cols = _rows(N, BLOCK_N, BLOCK_D)
    o_hat, r, w = _normalised(
        o_ptr, sob, soh, son, w_ptr, bh, H, tokens, valid, cols, D, eps
    )
    z = _tile(z_ptr, szb, szh, szn, bh, H, tokens, valid, cols, D)
    dy = _tile(dy_ptr, syb, syh, syn, bh, H, tokens, valid, cols, D)
    silu, silu_grad = _silu_terms(z)
    dz = dy * o_hat * w[None, :] * silu_grad
    d_weighted = dy * silu  # d(w o_hat)
    d_hat = d_weighted * w[None, :]
    do = r[:, None] * (d_hat - o_hat * (tl.sum(d_hat * o_hat, 1) / D)[:, None])
    _store(do_ptr, sdob, sdoh, sdon, bh, H, tokens, valid, cols, D, do)
    _store(dz_ptr, sdzb, sdzh, sdzn, bh, H, tokens, valid, cols, D, dz)
    program = bh * tl.num_programs(0) + tl.program_id(0)
    dw = tl.sum(d_weighted * o_hat, 0)
    tl.store(dw_ptr + program.to(tl.int64) * BLOCK_D + cols, dw)
