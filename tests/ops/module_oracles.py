"""An attention module (``qkv`` and ``proj`` Linears around per-head maps)
checked against a float64 oracle of one head's attention map."""

import pytest
import torch
from mmpretrain.registry import MODELS


def attention_module(type_name, C=16, h=2):
    """The registered operator ``type_name`` in float64 (seed 0)."""
    torch.manual_seed(0)
    return MODELS.build(
        dict(type=type_name, embed_dims=C, num_heads=h)
    ).double()


def tokens(hw_shape, cls, C=16, B=2, seed=1):
    """Random float64 tokens (B, N, C) of an ``hw_shape`` patch grid, with
    a class token first when ``cls``."""
    g = torch.Generator().manual_seed(seed)
    N = hw_shape[0] * hw_shape[1] + int(cls)
    return torch.randn(B, N, C, generator=g, dtype=torch.float64)


def check_forward_is_proj_of_map_times_v(m, x, hw_shape, head_map):
    """``m.attention_map`` is ``head_map(q_i, k_i)`` -> (B, N, N) for every
    head i, and ``m(x)`` is proj(concat_i(map_i @ v_i)). The heads are split
    by hand from the qkv rows: [q | k | v], head i at i*d; N counts the
    class token too."""
    B, N, C = x.shape
    h, d = m.num_heads, C // m.num_heads
    out = m(x, hw_shape)
    attn = m.attention_map(x, hw_shape)
    assert attn.shape == (B, h, N, N)
    y = x @ m.qkv.weight.T + m.qkv.bias
    heads = []
    for i in range(h):
        q_i = y[..., i * d : (i + 1) * d]
        k_i = y[..., C + i * d : C + (i + 1) * d]
        v_i = y[..., 2 * C + i * d : 2 * C + (i + 1) * d]
        a_i = head_map(q_i, k_i)
        torch.testing.assert_close(attn[:, i], a_i, rtol=1e-10, atol=1e-12)
        heads.append(attn[:, i] @ v_i)
    expected = torch.cat(heads, -1) @ m.proj.weight.T + m.proj.bias
    torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-10)


def check_refuses_another_grid(m, cls, hw_shape):
    """Tokens of a 4x4 grid (a class token first when ``cls``) given as an
    ``hw_shape`` grid: forward and attention map refuse them, naming it."""
    x = tokens((4, 4), cls)
    grid = f'{hw_shape[0]}x{hw_shape[1]} patch grid'
    for call in (m, m.attention_map):
        with pytest.raises(ValueError, match=grid):
            call(x, hw_shape)


def check_flops_linear_in_tokens(m, extra):
    """``m`` (width C = 768, 12 heads of d = 64): its flops double with
    the token count, and at N = 197 tokens they are the projections'
    8 N C^2, the token mixing's 4 N C d and ``extra`` N C more."""
    f = [m.flops(n, None) for n in (197, 394, 788)]
    assert f[1] == 2 * f[0] and f[2] == 2 * f[1]
    C, d, N = 768, 64, 197
    assert f[0] == 8 * N * C * C + 4 * N * C * d + extra * N * C


def check_gradcheck(m):
    """Float64 gradients through ``m`` on a 2x3 grid with a class token."""
    x = tokens((2, 3), True, C=m.qkv.in_features, B=1).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: m(x, (2, 3)), (x,))


def check_bf16_autocast_large_inputs(m, attend):
    """``m`` (float32, width 32, 4 heads) under bf16 autocast on tokens of
    magnitude ~1e3 (14x14 grid and a class token): a finite bf16 output
    within 2 % of the float64 reference built from the bf16 qkv output
    that autocast produced (which isolates the operator's own numerics).
    ``attend(q, k, v)``: (B, h, N, d) each -> (B, h, N, d)."""
    x = 1e3 * tokens((14, 14), True, C=32).float()
    recorded = []
    m.qkv.register_forward_hook(lambda mod, inp, out: recorded.append(out))
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = m(x, (14, 14))
    assert out.dtype == torch.bfloat16
    assert torch.isfinite(out).all()
    y = recorded[0].double()
    B, N, C = y.shape[0], y.shape[1], 32
    q, k, v = y.reshape(B, N, 3, 4, 8).permute(2, 0, 3, 1, 4)
    o = attend(q, k, v).transpose(1, 2).reshape(B, N, C)
    reference = o @ m.proj.weight.double().T + m.proj.bias.double()
    error = (out.double() - reference).abs().max()
    assert error < 0.02 * reference.abs().max()
