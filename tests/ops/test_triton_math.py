"""mmlvit.ops.common.triton_math: e^x as 2^(x log2 e) and ln x as log2(x) ln 2,
each in two machine instructions an element (sm_90, compiled without a
GPU), and their values on a GPU. Their values on CPU are every fused
kernel's interpreter check."""

import pytest
import torch

triton = pytest.importorskip('triton')
tl = pytest.importorskip('triton.language')

from lab.benchmarks.kernel_resources import (  # noqa: E402
    KernelCase,
    kernel_resources,
)
from mmlvit.ops.common import triton_math  # noqa: E402

BLOCK = 512
WARPS = 4  # BLOCK / (32 WARPS) = 4 elements a thread


@triton.jit
def _elementwise_kernel(
    x_ptr, y_ptr, n, FUNCTION: tl.constexpr, BLOCK: tl.constexpr
):  # fmt: skip
    """y = FUNCTION(x) over n fp32 elements, one program looping over
    tiles; FUNCTION: 0 triton_math.exp, 1 tl.exp, 2 triton_math.sigmoid,
    3 triton_math.log, 4 tl.log."""
    for start in range(0, n, BLOCK):
        i = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + i, mask=i < n, other=0.0)
        if FUNCTION == 0:
            y = triton_math.exp(x)
        elif FUNCTION == 1:
            y = tl.exp(x)
        elif FUNCTION == 2:
            y = triton_math.sigmoid(x)
        elif FUNCTION == 3:
            y = triton_math.log(x)
        else:
            y = tl.log(x)
        tl.store(y_ptr + i, y, mask=i < n)


def _instructions(function):
    case = KernelCase(
        'elementwise',
        _elementwise_kernel,
        dict(x_ptr='fp32', y_ptr='fp32'),
        dict(FUNCTION=function, BLOCK=BLOCK),
        WARPS,
    )
    (loop,) = kernel_resources(case, loops=True)['loops']
    return loop['instructions'], loop['special']


def test_exp_saves_the_denormal_guard():
    """tl.exp's ex2.approx.f32 is guarded (a compare and two predicated
    products around MUFU.EX2); exp2's flush-to-zero form is not: three
    instructions fewer an element (a MUFU.EX2 each, ptxas unrolls the
    loop)."""
    ours, guarded = _instructions(0), _instructions(1)
    assert ours[1] == guarded[1] >= BLOCK // (32 * WARPS)
    assert guarded[0] - ours[0] == 3 * ours[1]


def test_log_is_a_special_function_and_a_product():
    """tl.log is libdevice's polynomial (no MUFU); ours is MUFU.LG2 in its
    flush-to-zero form (no guard) and a product by ln 2: a loop of as many
    instructions as exp's, one MUFU an element."""
    ours, accurate = _instructions(3), _instructions(4)
    assert accurate[1] == 0
    assert ours == _instructions(0)


@pytest.mark.cuda
def test_cuda_log_within_its_bound():
    """On [1/2, 2]: within 2^-22 ln 2 (the approximation) + 2^-25 (the
    product's rounding) < 2^-22."""
    x = torch.linspace(0.5, 2.0, 100_001, device='cuda')
    y = torch.empty_like(x)
    _elementwise_kernel[(1,)](x, y, x.numel(), FUNCTION=3, BLOCK=BLOCK)
    assert (y.double() - x.double().log()).abs().max() <= 2.0**-22


@pytest.mark.cuda
def test_cuda_values_match_torch():
    """Within fp32's rounding of x log2 e (relative 6e-8 |x log2 e|) and
    the approximation's 2 ulp; below fp32's normal range, 0 or about it
    (flushed)."""
    x = torch.linspace(-100.0, 100.0, 100_001, device='cuda')
    for function, ref in ((0, torch.exp), (2, torch.sigmoid)):
        expected = ref(x.double())
        y = torch.empty_like(x)
        _elementwise_kernel[(1,)](
            x, y, x.numel(), FUNCTION=function, BLOCK=BLOCK
        )  # fmt: skip
        normal = (expected >= 2.0**-125) & (expected < 3e38)
        bound = 1e-7 * (1 + x.double().abs() * 1.4427) + 2.0**-22
        error = (y.double() - expected).abs() / expected
        assert (error[normal] <= bound[normal]).all()
        assert (y[expected < 2.0**-127].abs() <= 2.0**-126).all()
        assert torch.isfinite(y[expected < 3e38]).all()
    assert y.min() >= 0 and y.max() <= 1  # sigmoid's range
