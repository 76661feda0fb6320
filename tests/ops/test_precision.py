"""mmlvit.ops.common.precision: autocast off, accumulation in at least
fp32, the result cast back."""

import pytest
import torch

from mmlvit.ops.common.precision import (
    accumulation_dtype,
    fp32_accumulation,
    fp32_scope,
)

F16, BF16, F32, F64 = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
)


@pytest.mark.parametrize(
    'dtypes, expected',
    [
        ((F16,), F32),
        ((BF16,), F32),
        ((F32,), F32),
        ((F64,), F64),
        ((F16, BF16), F32),
        ((BF16, F64), F64),
        ((), F32),
    ],
)
def test_accumulation_dtype_is_the_widest_and_at_least_fp32(dtypes, expected):
    assert accumulation_dtype(*dtypes) is expected


def test_scope_turns_autocast_off_and_casts_to_one_dtype():
    x, w = torch.ones(2, 3, dtype=BF16), torch.ones(4, 3)
    with torch.autocast('cpu', dtype=BF16):
        with fp32_scope(x, None, w) as (x32, nothing, w32):
            assert not torch.is_autocast_enabled('cpu')
            assert nothing is None
            assert x32.dtype == w32.dtype == F32
            assert w32 is w  # already fp32: not copied
            y = torch.nn.functional.linear(x32, w32)
        assert torch.is_autocast_enabled('cpu')
    assert y.dtype == F32


def test_decorator_casts_tensor_arguments_and_the_result():
    seen = {}

    @fp32_accumulation(result_dtype_of='v')
    def op(q, v, scale=2.0, mask=None):
        seen.update(
            q=q.dtype,
            v=v.dtype,
            mask=mask.dtype,
            autocast=torch.is_autocast_enabled('cpu'),
        )
        return (q * v).sum(-1, keepdim=True) * scale

    q, v = torch.ones(3, 4, dtype=F16), torch.ones(3, 4, dtype=BF16)
    mask = torch.ones(3, dtype=torch.bool)
    with torch.autocast('cpu', dtype=BF16):
        out = op(q, v=v, mask=mask)
    assert seen == dict(q=F32, v=F32, mask=torch.bool, autocast=False)
    assert out.dtype == BF16
    assert torch.equal(out, torch.full((3, 1), 8.0, dtype=BF16))
    # fp64 anywhere: computed and returned (v is fp64) in fp64.
    assert op(q, torch.ones(3, 4, dtype=F64), mask=mask).dtype == F64


def test_decorator_without_result_dtype_keeps_the_accumulation_dtype():
    @fp32_accumulation()
    def op(x):
        return x * 2

    assert op(torch.ones(2, dtype=BF16)).dtype == F32
    assert op(torch.ones(2, dtype=F64)).dtype == F64


def test_decorator_passes_gradients_back_in_the_input_dtype():
    @fp32_accumulation(result_dtype_of='x')
    def op(x):
        return x.square()

    x = torch.full((3,), 3.0, dtype=BF16, requires_grad=True)
    op(x).sum().backward()
    assert x.grad.dtype == BF16
    assert torch.equal(x.grad, torch.full((3,), 6.0, dtype=BF16))
