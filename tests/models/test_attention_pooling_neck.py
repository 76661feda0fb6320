"""AttentionPoolingNeck against the MAP formula written out head by head in
float64 (arXiv:1810.00825, as SigLIP pools), and its input checks."""

import math

import pytest
import torch
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS

import mmlvit  # noqa: F401


def build(**kwargs):
    init_default_scope('mmpretrain')
    cfg = dict(type='AttentionPoolingNeck', in_channels=12, num_heads=3)
    neck = MODELS.build(cfg | kwargs).double()
    torch.manual_seed(0)
    with torch.no_grad():
        for param in neck.parameters():
            param.copy_(torch.randn_like(param) * 0.5)
    return neck


def layer_norm(y, weight, bias, eps=1e-6):
    mean = y.mean(-1, keepdim=True)
    var = ((y - mean) ** 2).mean(-1, keepdim=True)
    return (y - mean) / torch.sqrt(var + eps) * weight + bias


def gelu(y):
    return 0.5 * y * (1 + torch.erf(y / math.sqrt(2)))


def explicit_map(neck, x):
    """Per head h: softmax(q_h k_h^T / sqrt(d)) v_h with q from the first
    latent, k and v from the tokens; concat, proj, y + MLP(LN(y))."""
    C, heads = x.shape[-1], neck.num_heads
    d = C // heads
    W_kv, b_kv = neck.kv.weight, neck.kv.bias
    q = neck.latent[0, 0] @ neck.q.weight.T + neck.q.bias  # (C,)
    k = x @ W_kv[:C].T + b_kv[:C]  # (B, N, C)
    v = x @ W_kv[C:].T + b_kv[C:]
    outs = []
    for h in range(heads):
        part = slice(h * d, (h + 1) * d)
        scores = torch.einsum('d,bnd->bn', q[part], k[..., part])
        weights = torch.softmax(scores / math.sqrt(d), dim=-1)
        outs.append(torch.einsum('bn,bnd->bd', weights, v[..., part]))
    y = torch.cat(outs, -1) @ neck.proj.weight.T + neck.proj.bias
    z = layer_norm(y, neck.norm.weight, neck.norm.bias)
    mlp = neck.mlp
    hidden = gelu(z @ mlp.fc1.weight.T + mlp.fc1.bias)
    return y + hidden @ mlp.fc2.weight.T + mlp.fc2.bias


def test_neck_is_the_map_formula_in_float64():
    neck = build(feedforward_channels=20)
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    (pooled,) = neck((x,))
    assert pooled.shape == (2, 12)
    torch.testing.assert_close(pooled, explicit_map(neck, x))
    # Each input of the tuple is pooled.
    assert len(neck((x, x[:, :3]))) == 2


def test_the_first_of_several_latents_is_the_feature():
    neck = build(latent_len=2)
    assert neck.latent.shape == (1, 2, 12)
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    torch.testing.assert_close(neck((x,))[0], explicit_map(neck, x))


def test_inputs_other_than_tokens_name_the_fix():
    neck = build()
    with pytest.raises(ValueError, match=r"out_type='raw'"):
        neck((torch.randn(2, 12, 4, 4, dtype=torch.float64),))
    with pytest.raises(ValueError, match='num_heads=5 must divide'):
        build(num_heads=5)


def test_init_draws_the_latent():
    init_default_scope('mmpretrain')
    neck = MODELS.build(
        dict(type='AttentionPoolingNeck', in_channels=64, num_heads=2)
    )
    neck.init_weights()
    assert 0.05 < neck.latent.std() < 0.2  # std 64 ** -0.5
