"""Elementwise math of the project's Triton kernels, in the fewest machine
instructions that keep the numbers of Triton's own functions.

On fp32, ``tl.exp(x)`` compiles to ``ex2.approx.f32`` of x log2(e), which
ptxas wraps in a guard for results below fp32's normal range: five
instructions an element on sm_90 (the product, a compare, two predicated
products around MUFU.EX2). ``tl.exp2`` compiles to the flush-to-zero form,
``ex2.approx.ftz.f32``: two instructions (the product and MUFU.EX2), the
product rounded as before. The two differ only where exp(x) < 2^-126 (x <
-87.3), which the latter gives as 0 (tools/analysis/kernel_resources.py
--loops counts the kernels' instructions). Triton's interpreter computes
exp2 of the rounded product exactly, as the GPU does to within its
approximation (2 ulp), where its ``tl.exp`` skipped the rounding.

``tl.log`` (and ``tl.log2``) compile to libdevice's accurate logf: a
polynomial of about twenty instructions an element and no special-function
unit. On [1/2, 2], ``lg2.approx.ftz.f32`` (MUFU.LG2) is within 2^-22 of
log2 x, an error of at most 3 ulp of fp32 there; :func:`log` is that times
ln 2, two instructions. Triton's interpreter runs no inline assembly: there
it is numpy's exact log2 times ln 2, rounded as on the GPU. The
instruction is NVIDIA's (PTX), as are the kernels' launch checks.
"""

import triton
import triton.language as tl

from .triton_runtime import interpreting

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)
# Read at import, as Triton reads TRITON_INTERPRET to make its kernels.
_INTERPRETED = tl.constexpr(interpreting())


@triton.jit
def exp(x):
    """e^x of an fp32 tile, as 2^(x log2 e)."""
    return tl.exp2(x * LOG2E)


@triton.jit
def sigmoid(x):
    """1 / (1 + e^-x) of an fp32 tile."""
    return 1.0 / (1.0 + exp(-x))


@triton.jit
def log(x):
    """ln x of an fp32 tile with x in [1/2, 2] (within 2^-22 ln 2 + fp32's
    rounding), as log2(x) ln 2; outside that range, within 2 ulp of log2
    x, then rounded."""
    if _INTERPRETED:
        log2 = tl.log2(x)
    else:
        log2 = tl.inline_asm_elementwise(
            'lg2.approx.ftz.f32 $0, $1;',
            '=f,f',
            [x],
            dtype=tl.float32,
            is_pure=True,
            pack=1,
        )
    return log2 * LN2


@triton.jit
def _silu_terms(z):
    """silu(z) and silu'(z) = s (1 + z (1 - s)), s = sigmoid(z)."""
    s = sigmoid(z)
    return z * s, s * (1.0 + z * (1.0 - s))
