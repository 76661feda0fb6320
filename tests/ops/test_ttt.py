"""ViT^3 inner steps: closed forms against autograd of the stated losses."""

import pytest
import torch
import torch.nn.functional as F

from mmlvit.ops import (
    dwconv_inner_grad,
    swiglu_inner_grads,
    ttt_dwconv,
    ttt_swiglu,
)

ETA = 1 / 3


def swiglu(x, w1, w2):
    return (x @ w1) * F.silu(x @ w2)


def dwconv3x3(x, w):
    """Per-sample depthwise 3x3 cross-correlation, zero padding 1, tap by
    tap. x: (B, d, H, W); w: (B, d, 3, 3)."""
    H, W = x.shape[-2:]
    padded = F.pad(x, (1, 1, 1, 1))
    return sum(
        w[:, :, a, b, None, None] * padded[:, :, a : a + H, b : b + W]
        for a in range(3)
        for b in range(3)
    )


def column_norm(g):
    """Euclidean norm over the input axis (dim -2) of W."""
    return g.pow(2).sum(-2, keepdim=True).sqrt()


def autograd_swiglu_grads(k, v, w1, w2):
    """dL/dW1, dL/dW2 per (sample, head), L = -(eta/N) sum <f(k_t), v_t>."""
    B, h, N, d = k.shape
    w1 = w1.expand(B, h, d, d).clone().requires_grad_()
    w2 = w2.expand(B, h, d, d).clone().requires_grad_()
    loss = -(ETA / N) * (swiglu(k, w1, w2) * v).sum((-2, -1))  # (B, h)
    return torch.autograd.grad(loss.sum(), (w1, w2))


def autograd_dwconv_grad(k, v, w3):
    B, d, H, W = k.shape
    w = w3.reshape(1, d, 3, 3).expand(B, d, 3, 3).clone().requires_grad_()
    loss = -(ETA / (H * W)) * (dwconv3x3(k, w) * v).sum((-2, -1))  # (B, d)
    return torch.autograd.grad(loss.sum(), w)[0]


def qkv(shape, dtype=torch.float64, magnitude=1.0):
    return [torch.randn(shape, dtype=dtype) * magnitude for _ in range(3)]


def inner_weights(heads, dims, dtype=torch.float64, std=0.5):
    return [
        torch.randn(1, heads, dims, dims, dtype=dtype) * std for _ in range(2)
    ]


def test_default_scale_is_one_third():
    torch.manual_seed(0)
    _, k, v = qkv((2, 3, 10, 4))
    w1, w2 = inner_weights(3, 4)
    torch.testing.assert_close(
        swiglu_inner_grads(k, v, w1, w2), swiglu_inner_grads(k, v, w1, w2, ETA)
    )


@pytest.mark.parametrize('tokens', [196, 63])
def test_swiglu_closed_form_grads_equal_autograd(tokens):
    torch.manual_seed(1)
    _, k, v = qkv((2, 3, tokens, 5))
    w1, w2 = inner_weights(3, 5)
    g1, g2 = swiglu_inner_grads(k, v, w1, w2)
    a1, a2 = autograd_swiglu_grads(k, v, w1, w2)
    assert g1.shape == g2.shape == (2, 3, 5, 5)
    torch.testing.assert_close(g1, a1, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g2, a2, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('hw_shape', [(14, 14), (7, 9), (24, 24)])
def test_dwconv_closed_form_grad_equals_autograd(hw_shape):
    torch.manual_seed(2)
    _, k, v = qkv((2, 4, *hw_shape))
    w3 = torch.randn(4, 1, 3, 3, dtype=torch.float64)
    grad = dwconv_inner_grad(k, v)
    assert grad.shape == (2, 4, 3, 3)
    torch.testing.assert_close(
        grad, autograd_dwconv_grad(k, v, w3), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize('tokens', [196, 63, 576])
def test_swiglu_output_is_one_normalised_step(tokens):
    torch.manual_seed(3)
    q, k, v = qkv((2, 3, tokens, 4))
    w1, w2 = inner_weights(3, 4)
    a1, a2 = autograd_swiglu_grads(k, v, w1, w2)
    new_w1 = w1 - a1 / (column_norm(a1) + 1)
    new_w2 = w2 - a2 / (column_norm(a2) + 1)
    out = ttt_swiglu(q, k, v, w1, w2)
    assert out.shape == q.shape and out.dtype == torch.float64
    torch.testing.assert_close(
        out, swiglu(q, new_w1, new_w2), rtol=1e-10, atol=1e-12
    )
    # The step matters: the output is not the untrained inner model's.
    assert (out - swiglu(q, w1, w2)).abs().max() > 1e-3


@pytest.mark.parametrize('hw_shape', [(14, 14), (7, 9), (24, 24)])
def test_dwconv_output_is_one_normalised_step(hw_shape):
    torch.manual_seed(4)
    q, k, v = qkv((2, 4, *hw_shape))
    w3 = torch.randn(4, 1, 3, 3, dtype=torch.float64) * 0.5
    grad = autograd_dwconv_grad(k, v, w3)
    norm = grad.pow(2).sum((-2, -1), keepdim=True).sqrt()
    new_w3 = w3.reshape(1, 4, 3, 3) - grad / (norm + 1)
    out = ttt_dwconv(q, k, v, w3)
    assert out.shape == q.shape and out.dtype == torch.float64
    torch.testing.assert_close(
        out, dwconv3x3(q, new_w3), rtol=1e-10, atol=1e-12
    )
    assert (out - dwconv3x3(q, w3.reshape(1, 4, 3, 3))).abs().max() > 1e-3


def test_each_sample_fits_its_own_weights():
    """Per-sample inner step: a sample's output ignores the others."""
    torch.manual_seed(5)
    q, k, v = qkv((3, 2, 20, 4))
    w1, w2 = inner_weights(2, 4)
    torch.testing.assert_close(
        ttt_swiglu(q, k, v, w1, w2)[1:2],
        ttt_swiglu(q[1:2], k[1:2], v[1:2], w1, w2),
    )
    q, k, v = qkv((3, 4, 5, 6))
    w3 = torch.randn(4, 1, 3, 3, dtype=torch.float64)
    torch.testing.assert_close(
        ttt_dwconv(q, k, v, w3)[2:], ttt_dwconv(q[2:], k[2:], v[2:], w3)
    )


def test_gradcheck_swiglu():
    torch.manual_seed(6)
    q, k, v = (t.requires_grad_() for t in qkv((1, 2, 6, 3)))
    w1, w2 = (w.requires_grad_() for w in inner_weights(2, 3))
    assert torch.autograd.gradcheck(ttt_swiglu, (q, k, v, w1, w2))


def test_gradcheck_dwconv():
    torch.manual_seed(7)
    q, k, v = (t.requires_grad_() for t in qkv((1, 2, 3, 4)))
    w3 = torch.randn(2, 1, 3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ttt_dwconv, (q, k, v, w3))


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_autocast_large_inputs_stay_finite(dtype):
    torch.manual_seed(8)
    magnitude = 1e3 if dtype == torch.bfloat16 else 30.0
    q, k, v = qkv((2, 3, 196, 8), torch.float32, magnitude)
    w1, w2 = inner_weights(3, 8, torch.float32, std=0.02)
    reference = ttt_swiglu(q, k, v, w1, w2)
    with torch.autocast('cpu', dtype=dtype):
        out = ttt_swiglu(*(t.to(dtype) for t in (q, k, v)), w1, w2)
    assert out.dtype == dtype and torch.isfinite(out).all()
    scale = reference.abs().max()
    assert (out.float() - reference).abs().max() < 0.05 * scale

    q, k, v = qkv((2, 8, 14, 14), torch.float32, magnitude)
    w3 = torch.randn(8, 1, 3, 3) * 0.02
    reference = ttt_dwconv(q, k, v, w3)
    with torch.autocast('cpu', dtype=dtype):
        out = ttt_dwconv(*(t.to(dtype) for t in (q, k, v)), w3)
    assert out.dtype == dtype and torch.isfinite(out).all()
    scale = reference.abs().max()
    assert (out.float() - reference).abs().max() < 0.05 * scale
