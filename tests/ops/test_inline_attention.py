"""InLine attention against float64 oracles written out from operators.md
section 2."""

import pytest
import torch
from mmpretrain.registry import MODELS

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
    torch.manual_seed(0)
    return MODELS.build(
        dict(type='InLineAttention', embed_dims=C, num_heads=h)
    ).double()


def _tokens(hw_shape, cls, C=16, B=2, seed=1):
    g = torch.Generator().manual_seed(seed)
    N = hw_shape[0] * hw_shape[1] + int(cls)
    return torch.randn(B, N, C, generator=g, dtype=torch.float64)


@pytest.mark.parametrize('hw_shape', [(14, 14), (7, 9)])
@pytest.mark.parametrize('cls', [True, False])
def test_module_forward_is_proj_of_map_times_v(hw_shape, cls):
    m = _module()
    x = _tokens(hw_shape, cls)
    B, N, C = x.shape
    h, d = m.num_heads, C // m.num_heads
    s = d**-0.5
    out = m(x, hw_shape)
    attn = m.attention_map(x, hw_shape)
    assert attn.shape == (B, h, N, N)

    # Heads split by hand from the qkv rows: [q | k | v], head i at i*d.
    # N counts the class token too.
    y = x @ m.qkv.weight.T + m.qkv.bias
    heads = []
    for i in range(h):
        q_i = y[..., i * d : (i + 1) * d]
        k_i = y[..., C + i * d : C + (i + 1) * d]
        v_i = y[..., 2 * C + i * d : 2 * C + (i + 1) * d]
        k_bar = k_i.sum(1, keepdim=True) / N
        a_i = (
            s / N * q_i @ k_i.transpose(-2, -1)
            + (1 - s * q_i @ k_bar.transpose(-2, -1)) / N
        )
        torch.testing.assert_close(attn[:, i], a_i, rtol=1e-10, atol=1e-12)
        heads.append(attn[:, i] @ v_i)
    expected = torch.cat(heads, -1) @ m.proj.weight.T + m.proj.bias
    torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-10)


def test_module_gradcheck():
    m = _module(C=8, h=2)
    x = _tokens((2, 3), True, C=8, B=1).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: m(x, (2, 3)), (x,))


def test_module_bf16_autocast_large_inputs():
    # The reference starts from the bf16 qkv output that autocast produced,
    # so it isolates the operator's own numerics.
    m = _module(C=32, h=4).float()
    x = 1e3 * _tokens((14, 14), True, C=32).float()
    recorded = []
    m.qkv.register_forward_hook(lambda mod, inp, out: recorded.append(out))
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = m(x, (14, 14))
    assert out.dtype == torch.bfloat16
    assert torch.isfinite(out).all()
    y = recorded[0].double()
    B, N, C = y.shape[0], y.shape[1], 32
    q, k, v = y.reshape(B, N, 3, 4, 8).permute(2, 0, 3, 1, 4)
    s = 8**-0.5
    k_bar = k.mean(2, keepdim=True)
    attn = (
        s / N * q @ k.transpose(-2, -1)
        + (1 - s * q @ k_bar.transpose(-2, -1)) / N
    )
    o = (attn @ v).transpose(1, 2).reshape(B, N, C)
    reference = o @ m.proj.weight.double().T + m.proj.bias.double()
    error = (out.double() - reference).abs().max()
    assert error < 0.02 * reference.abs().max()


def test_module_rejects_tokens_that_do_not_fit_the_grid():
    m = _module()
    x = _tokens((4, 4), True)
    with pytest.raises(ValueError, match='3x3 patch grid'):
        m(x, (3, 3))
    with pytest.raises(ValueError, match='3x3 patch grid'):
        m.attention_map(x, (3, 3))


def test_module_flops_are_linear_in_tokens():
    m = MODELS.build(
        dict(type='InLineAttention', embed_dims=768, num_heads=12)
    )
    f = [m.flops(n, None) for n in (197, 394, 788)]
    assert f[1] == 2 * f[0] and f[2] == 2 * f[1]
    C, d, N = 768, 64, 197
    assert f[0] == 8 * N * C * C + 4 * N * C * d + 6 * N * C
