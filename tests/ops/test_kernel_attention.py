"""Kernel linear attention (ELU+1, ReLU, identity) against float64 oracles
written out from operators.md section 1."""

import math

import module_oracles as oracles
import pytest
import torch
from mmpretrain.registry import MODELS

from mmlvit.ops import (
    feature_map,
    kernel_attention_map,
    kernel_linear_attention,
)

EPS = 1e-6
KERNELS = ['elu', 'relu', 'identity']


def phi(x, kernel):
    """The feature maps, written piecewise (independent of torch's elu)."""
    if kernel == 'elu':
        return torch.where(x > 0, x + 1, torch.exp(x))
    if kernel == 'relu':
        return torch.where(x > 0, x, torch.zeros_like(x))
    return x


def explicit_map(q, k, kernel, eps=EPS):
    """A_ij = phi(q_i).phi(k_j) / (sum_l phi(q_i).phi(k_l) + eps), entry by
    entry. q, k: (B, h, N, d) -> (B, h, N, N)."""
    B, h, N, _ = q.shape
    pq, pk = phi(q, kernel), phi(k, kernel)
    attn = torch.empty(B, h, N, N, dtype=q.dtype)
    for b in range(B):
        for head in range(h):
            for i in range(N):
                dots = [
                    torch.dot(pq[b, head, i], pk[b, head, j]) for j in range(N)
                ]
                row_sum = sum(dots) + eps
                for j in range(N):
                    attn[b, head, i, j] = dots[j] / row_sum
    return attn


def qkv(B=2, h=2, N=9, d=4, dtype=torch.float64, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(B, h, N, d, generator=g, dtype=dtype) * scale
        for _ in range(3)
    ]


def test_feature_maps():
    x = torch.linspace(-4, 4, 81, dtype=torch.float64)
    for kernel in KERNELS:
        torch.testing.assert_close(feature_map(x, kernel), phi(x, kernel))
    assert (feature_map(x, 'elu') > 0).all()
    with pytest.raises(ValueError, match='Unknown kernel'):
        feature_map(x, 'softplus')


@pytest.mark.parametrize('kernel', KERNELS)
def test_map_equals_formula_and_forward_equals_map_times_v(kernel):
    q, k, v = qkv()
    attn = kernel_attention_map(q, k, kernel=kernel)
    oracle = explicit_map(q, k, kernel)
    torch.testing.assert_close(attn, oracle, rtol=1e-10, atol=1e-12)
    out = kernel_linear_attention(q, k, v, kernel=kernel)
    torch.testing.assert_close(out, oracle @ v, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize('kernel', ['elu', 'relu'])
def test_fp32_linear_path_matches_map_form(kernel):
    q, k, v = qkv(B=1, h=3, N=197, d=16, dtype=torch.float32)
    attn = kernel_attention_map(q, k, kernel=kernel)
    assert attn.dtype == torch.float32
    torch.testing.assert_close(
        kernel_linear_attention(q, k, v, kernel=kernel),
        attn @ v,
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.parametrize('kernel', ['elu', 'relu'])
def test_positive_kernel_rows_are_distributions(kernel):
    q, k, _ = qkv(N=16)
    attn = kernel_attention_map(q, k, kernel=kernel)
    assert (attn >= 0).all()
    scores = phi(q, kernel) @ phi(k, kernel).transpose(-2, -1)
    row_sums = scores.sum(-1)
    # Each row sums to r / (r + eps): 1 up to eps, 0 for an all-zero row.
    torch.testing.assert_close(
        attn.sum(-1), row_sums / (row_sums + EPS), rtol=1e-12, atol=1e-12
    )
    if kernel == 'elu':
        assert ((attn.sum(-1) - 1).abs() < 1e-4).all()


def test_relu_row_without_positive_feature_gives_zero():
    q, k, v = qkv(N=6)
    q[0, 0, 2] = -1.0 - q[0, 0, 2].abs()  # all features of query 2 <= 0
    q[0, 0, 1] = 0.1 + q[0, 0, 1].abs()  # all features of query 1 > 0
    out = kernel_linear_attention(q, k, v, kernel='relu')
    attn = kernel_attention_map(q, k, kernel='relu')
    assert torch.equal(out[0, 0, 2], torch.zeros_like(out[0, 0, 2]))
    assert torch.equal(attn[0, 0, 2], torch.zeros_like(attn[0, 0, 2]))
    assert out[0, 0, 1].abs().sum() > 0


def test_eps_enters_the_denominator():
    q, k, v = qkv(N=5)
    big_eps = kernel_linear_attention(q, k, v, kernel='elu', eps=1e3)
    oracle = explicit_map(q, k, 'elu', eps=1e3) @ v
    torch.testing.assert_close(big_eps, oracle, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('kernel', ['elu', 'relu'])
def test_gradcheck(kernel):
    q, k, v = (t.requires_grad_() for t in qkv(B=1, h=2, N=5, d=3))
    assert torch.autograd.gradcheck(
        lambda q, k, v: kernel_linear_attention(q, k, v, kernel=kernel),
        (q, k, v),
    )
    assert torch.autograd.gradcheck(
        lambda q, k: kernel_attention_map(q, k, kernel=kernel), (q, k)
    )


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_low_precision_accumulates_in_fp32(dtype):
    # |k|, |v| ~ 300 and N = 64: phi(k)^T v has entries ~ 1e6, beyond
    # fp16's range, while the output (an average of values) is not.
    q, k, v = qkv(B=1, h=2, N=64, d=8, dtype=torch.float64, seed=3)
    k, v = 300 * k, 300 * v
    naive = phi(k, 'elu').to(dtype).transpose(-2, -1) @ v.to(dtype)
    if dtype == torch.float16:
        assert not torch.isfinite(naive).all()  # the test can fail
    reference = kernel_linear_attention(q, k, v, kernel='elu')
    with torch.autocast('cpu', dtype=dtype):
        out = kernel_linear_attention(
            q.to(dtype), k.to(dtype), v.to(dtype), kernel='elu'
        )
    assert out.dtype == dtype
    assert torch.isfinite(out).all()
    scale = reference.abs().max()
    assert (out.double() - reference).abs().max() < 0.05 * scale


MODULES = [('ELULinearAttention', 'elu'), ('ReLULinearAttention', 'relu')]


def batched_map(q, k, kernel):
    """The kernel map of batched heads: (..., N, d) -> (..., N, N)."""
    scores = phi(q, kernel) @ phi(k, kernel).transpose(-2, -1)
    return scores / (scores.sum(-1, keepdim=True) + EPS)


@pytest.mark.parametrize('type_name,kernel', MODULES)
@pytest.mark.parametrize('hw_shape', [(14, 14), (7, 9)])
@pytest.mark.parametrize('cls', [True, False])
def test_module_forward_is_proj_of_map_times_v(
    type_name, kernel, hw_shape, cls
):
    oracles.check_forward_is_proj_of_map_times_v(
        oracles.attention_module(type_name),
        oracles.tokens(hw_shape, cls),
        hw_shape,
        lambda q, k: batched_map(q, k, kernel),
    )


def test_module_gradcheck():
    oracles.check_gradcheck(
        oracles.attention_module('ELULinearAttention', C=8, h=2)
    )


@pytest.mark.parametrize('type_name,kernel', MODULES)
def test_module_bf16_autocast_large_inputs(type_name, kernel):
    # ReLU features near 0 may flip sign when the qkv output is rounded to
    # bf16, which no accumulation can undo: the reference starts from it.
    oracles.check_bf16_autocast_large_inputs(
        oracles.attention_module(type_name, C=32, h=4).float(),
        lambda q, k, v: batched_map(q, k, kernel) @ v,
    )


def test_module_rejects_tokens_that_do_not_fit_the_grid():
    m = oracles.attention_module('ReLULinearAttention')
    oracles.check_refuses_another_grid(m, False, (4, 5))


def test_module_flops_are_linear_in_tokens():
    m = oracles.attention_module('ELULinearAttention', C=768, h=12)
    softmax = MODELS.build(
        dict(type='SoftmaxAttention', embed_dims=768, num_heads=12)
    )
    oracles.check_flops_linear_in_tokens(m, extra=4)
    C, d = 768, 64
    # The attention part is O(N C d): at 3137 tokens the saving against
    # softmax's O(N^2 C) is close to (8C + 4N) / (8C + 4d).
    ratio = softmax.flops(3137, None) / m.flops(3137, None)
    assert math.isclose(
        ratio, (8 * C + 4 * 3137) / (8 * C + 4 * d + 4), rel_tol=1e-12
    )
