"""InLine attention against float64 oracles written out from operators.md
section 2."""

import module_oracles as oracles
import pytest
import torch

from mmlvit.ops import inline_attention, inline_attention_map


def explicit_map(q, k, scale=None):
    """A_ij = (s/N) q_i.k_j + (1/N)(1 - s q_i.k_bar), entry by entry.
    q, k: (B, h, N, d) -> (B, h, N, N)."""
    B, h, N, d = q.shape
    s = d**-0.5 if scale is None else scale
    attn = torch.empty(B, h, N, N, dtype=q.dtype)
    for b in range(B):
        for head in range(h):
            k_bar = sum(k[b, head, j] for j in range(N)) / N
            for i in range(N):
                offset = (1 - s * torch.dot(q[b, head, i], k_bar)) / N
                for j in range(N):
                    attn[b, head, i, j] = (
                        s / N * torch.dot(q[b, head, i], k[b, head, j])
                        + offset
                    )
    return attn


def qkv(B=2, h=2, N=9, d=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(B, h, N, d, generator=g, dtype=dtype) for _ in range(3)
    ]


def test_map_equals_formula_and_forward_equals_map_times_v():
    q, k, v = qkv()
    attn = inline_attention_map(q, k)
    oracle = explicit_map(q, k)
    torch.testing.assert_close(attn, oracle, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(
        attn.sum(-1), torch.ones(2, 2, 9, dtype=q.dtype)
    )
    assert (attn < 0).any()  # signed map
    torch.testing.assert_close(
        inline_attention(q, k, v), oracle @ v, rtol=1e-9, atol=1e-10
    )


def test_fp32_linear_path_matches_map_form():
    q, k, v = qkv(B=1, h=3, N=197, d=16, dtype=torch.float32)
    attn = inline_attention_map(q, k)
    assert attn.dtype == torch.float32
    torch.testing.assert_close(
        inline_attention(q, k, v), attn @ v, rtol=1e-4, atol=1e-5
    )


def test_scale_argument():
    q, k, v = qkv(N=6)
    oracle = explicit_map(q, k, scale=0.2)
    torch.testing.assert_close(inline_attention_map(q, k, scale=0.2), oracle)
    torch.testing.assert_close(
        inline_attention(q, k, v, scale=0.2), oracle @ v
    )
    assert not torch.allclose(inline_attention(q, k, v), oracle @ v)


def test_gradcheck():
    q, k, v = (t.requires_grad_() for t in qkv(B=1, h=2, N=5, d=3))
    assert torch.autograd.gradcheck(inline_attention, (q, k, v))
    assert torch.autograd.gradcheck(inline_attention_map, (q, k))


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_low_precision_accumulates_in_fp32(dtype):
    # |k|, |v| ~ 300 and N = 64: k^T v has entries ~ 1e5-1e6, beyond fp16's
    # range, while the output stays below 1e4.
    q, k, v = qkv(B=1, h=2, N=64, d=8, seed=3)
    k, v = 300 * k, 300 * v
    naive = k.to(dtype).transpose(-2, -1) @ v.to(dtype)
    if dtype == torch.float16:
        assert not torch.isfinite(naive).all()  # the test can fail
    reference = inline_attention(q, k, v)
    with torch.autocast('cpu', dtype=dtype):
        out = inline_attention(q.to(dtype), k.to(dtype), v.to(dtype))
    assert out.dtype == dtype
    assert torch.isfinite(out).all()
    assert (out.double() - reference).abs().max() < (
        0.05 * reference.abs().max()
    )


def _module(C=16, h=2):
    return oracles.attention_module('InLineAttention', C, h)


def batched_map(q, k):
    """The InLine map of batched heads: (..., N, d) -> (..., N, N)."""
    N, s = q.shape[-2], q.shape[-1] ** -0.5
    k_bar = k.mean(-2, keepdim=True)
    return (
        s / N * q @ k.transpose(-2, -1)
        + (1 - s * q @ k_bar.transpose(-2, -1)) / N
    )


@pytest.mark.parametrize('hw_shape', [(14, 14), (7, 9)])
@pytest.mark.parametrize('cls', [True, False])
def test_module_forward_is_proj_of_map_times_v(hw_shape, cls):
    x = oracles.tokens(hw_shape, cls)
    oracles.check_forward_is_proj_of_map_times_v(
        _module(), x, hw_shape, batched_map
    )


def test_module_gradcheck():
    oracles.check_gradcheck(_module(C=8, h=2))


def test_module_bf16_autocast_large_inputs():
    oracles.check_bf16_autocast_large_inputs(
        _module(C=32, h=4).float(), lambda q, k, v: batched_map(q, k) @ v
    )


def test_module_rejects_tokens_that_do_not_fit_the_grid():
    oracles.check_refuses_another_grid(_module(), True, (3, 3))


def test_module_flops_are_linear_in_tokens():
    oracles.check_flops_linear_in_tokens(_module(C=768, h=12), extra=6)
