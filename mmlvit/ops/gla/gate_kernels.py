"""Triton kernels of GLA's log-gates from their logits l, for one scan
direction:

- :func:`log_gate_kernel`: g = logsigmoid(l) / T;
- :func:`log_gate_grad_kernel`: dl = dg sigmoid(-l) / T.

A program takes ``BLOCK_N`` tokens of one head (``bh``); l, g and their
gradients are (B, H, N, d) views addressed through (batch, head, token)
strides with unit channel stride (the direction's half of token-major
(B, N, 2 H d) logits), so nothing is copied. fp32 in registers; the
tensors are the logits' dtype (fp32).
"""

import triton
import triton.language as tl

from ..fused_linear.kernels import _store, _tile
from ..gated_norm.kernels import _rows

# Sizes that vary between calls are not specialised on; the head width D
# is (a multiple of 16: rows load as 16-byte vectors).
SIZES = ['H', 'N']


@triton.jit(do_not_specialize=SIZES)
def log_gate_kernel(
    l_ptr, g_ptr, slb, slh, sln, sgb, sgh, sgn, H, N, D, inv_temperature,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    bh, tokens, valid, cols = _rows(N, BLOCK_N, BLOCK_D)
    logits = _tile(l_ptr, slb, slh, sln, bh, H, tokens, valid, cols, D)
    # logsigmoid(l) = min(l, 0) - log(1 + exp(-|l|)), exact for any l.
    soft = tl.log(1.0 + tl.exp(-tl.abs(logits)))
    g = (tl.minimum(logits, 0.0) - soft) * inv_temperature
    _store(g_ptr, sgb, sgh, sgn, bh, H, tokens, valid, cols, D, g)


@triton.jit(do_not_specialize=SIZES)
def log_gate_grad_kernel(
    l_ptr, dg_ptr, dl_ptr, slb, slh, sln, sgb, sgh, sgn, sdb, sdh, sdn,
    H, N, D, inv_temperature,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    bh, tokens, valid, cols = _rows(N, BLOCK_N, BLOCK_D)
    logits = _tile(l_ptr, slb, slh, sln, bh, H, tokens, valid, cols, D)
    dg = _tile(dg_ptr, sgb, sgh, sgn, bh, H, tokens, valid, cols, D)
    # sigmoid(-l) from exp(-|l|), which cannot overflow.
    e = tl.exp(-tl.abs(logits))
    sigmoid = tl.where(logits > 0, e, 1.0) / (1.0 + e)
    dl = dg * sigmoid * inv_temperature
    _store(dl_ptr, sdb, sdh, sdn, bh, H, tokens, valid, cols, D, dl)
