"""Second derivatives through the operators' PyTorch paths
(``backend='torch'``), against finite differences in float64. The fused
kernels' backward is first-order only (tests/ops/test_fused_entry.py)."""

import pytest
import torch
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from tiny_vit import backbone_cfg

import mmlvit  # noqa: F401

TINY = dict(embed_dims=16, num_layers=1, num_heads=2, feedforward_channels=32)
SECOND_ORDER = [
    'ELULinearAttention',
    'InLineAttention',
    'MHLAttention',
    'ReLULinearAttention',
    'TTTAttention',
]


def gradient_norm(operator):
    """x -> ||d <model(x), w> / dx||^2, differentiable (create_graph)."""
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    cfg = backbone_cfg(
        operator,
        TINY,
        img_size=16,
        in_channels=3,
        attn_cfg=dict(type=operator, backend='torch'),
    )
    model = MODELS.build(cfg).double()

    def norm(x):
        (out,) = model(x)
        w = torch.linspace(-1, 1, out.numel(), dtype=out.dtype)
        loss = (out * w.reshape(out.shape)).sum()
        (grad,) = torch.autograd.grad(loss, x, create_graph=True)
        return grad.square().sum()

    return norm


@pytest.mark.parametrize('operator', SECOND_ORDER)
def test_second_derivatives_match_finite_differences(operator):
    norm = gradient_norm(operator)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(1, 3, 16, 16, dtype=torch.float64, generator=gen)
    v = torch.randn(x.shape, dtype=torch.float64, generator=gen)
    (grad,) = torch.autograd.grad(norm(x.requires_grad_()), x)
    eps = 1e-6
    x = x.detach().requires_grad_()
    finite = (norm(x + eps * v) - norm(x - eps * v)) / (2 * eps)
    assert (grad * v).sum().item() == pytest.approx(finite.item(), rel=1e-6)
    assert finite.abs().item() > 1e-3  # a second derivative, not zero


def test_gla_torch_path_refuses_second_derivatives():
    """GLA's PyTorch scan writes its backward out (products into
    preallocated buffers), which autograd cannot differentiate: it
    raises rather than giving a wrong second derivative."""
    norm = gradient_norm('GatedLinearAttention')
    x = torch.randn(1, 3, 16, 16, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match='automatic differentiation'):
        torch.autograd.grad(norm(x), x)
