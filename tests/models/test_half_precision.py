"""Every registered linear operator under bf16 and fp16 autocast at
N = 16385 tokens (a 128 x 128 grid, plus a class token where the operator
takes one): finite outputs and gradients, close to its fp32 output. On CPU
the operators run their PyTorch references; on CUDA (tests marked ``cuda``)
their fused kernels at ViT-B's width."""

import pytest
import torch
from mmpretrain.registry import MODELS

from mmlvit.models.attentions import registered_operators

GRID = (128, 128)
OPERATORS = sorted(registered_operators(linear_cost=True))
DTYPES = [torch.bfloat16, torch.float16]
# Bound on max |out - out_fp32| / max |out_fp32|: 16-bit rounding of the
# projections' inputs and outputs (a few 1e-3) amplified by the operators'
# normalisers.
BOUND = 0.05


def _check(type_, dtype, device, embed_dims, num_heads, batch):
    torch.manual_seed(0)
    attn = MODELS.build(
        dict(type=type_, embed_dims=embed_dims, num_heads=num_heads)
    ).to(device)
    extra = 0 if attn.patch_tokens_only else 1
    N = GRID[0] * GRID[1] + extra
    # Magnitudes of a trained ViT's normalised tokens, scaled up so that
    # the sums over 16385 tokens exceed fp16's range (65504).
    x = torch.randn(batch, N, embed_dims, device=device) * 4
    x_half = x.clone().requires_grad_()
    with torch.autocast(device, dtype=dtype):
        out = attn(x_half, GRID)
    assert out.dtype == dtype
    assert torch.isfinite(out).all(), f'{type_}: non-finite output'
    out.float().square().mean().backward()
    assert torch.isfinite(x_half.grad).all(), f'{type_}: non-finite grad'
    for name, p in attn.named_parameters():
        assert torch.isfinite(p.grad).all(), f'{type_}: {name}.grad'
    with torch.no_grad():
        reference = attn(x, GRID)
    err = (out.float() - reference).abs().max() / reference.abs().max()
    assert err < BOUND, f'{type_} {dtype}: {err:.3g}'


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('type_', OPERATORS)
def test_half_precision_autocast_at_16385_tokens(type_, dtype):
    _check(type_, dtype, 'cpu', embed_dims=64, num_heads=2, batch=1)


@pytest.mark.cuda
@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('type_', OPERATORS)
def test_cuda_half_precision_autocast_at_16385_tokens(type_, dtype):
    _check(type_, dtype, 'cuda', embed_dims=768, num_heads=12, batch=1)
