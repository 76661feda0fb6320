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
"""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def exp(x):
    """e^x of an fp32 tile, as 2^(x log2 e)."""
    return tl.exp2(x * LOG2E)


@triton.jit
def sigmoid(x):
    """1 / (1 + e^-x) of an fp32 tile."""
    return 1.0 / (1.0 + exp(-x))
