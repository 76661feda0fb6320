"""Mimetic and Impulse inits against their target structures."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tiny_vit import backbone_cfg

from mmlvit.transfer import TransferError, apply_init
from mmlvit.transfer.analytical import (
    draw_mimetic_z,
    impulse_init_,
    mimetic_init_,
    mimetic_qk,
    mimetic_vp,
    shift_matrix,
)

# Zheng et al.'s tap order: centre, up, right, left, down, then corners.
OFFSETS = [
    (0, 0),
    (-1, 0),
    (0, 1),
    (0, -1),
    (1, 0),
    (-1, -1),
    (-1, 1),
    (1, -1),
    (1, 1),
]


def best_rank_error(target, rank):
    """Frobenius error of the best rank-``rank`` approximation (numpy)."""
    s = np.linalg.svd(target.numpy(), compute_uv=False)
    return float(np.sqrt((s[rank:] ** 2).sum()))


def head_weights(attn, head):
    """(W_q^h, W_k^h) in the x @ W convention, each (C, d)."""
    C, h = attn.embed_dims, attn.num_heads
    d = C // h
    w = attn.qkv.weight.detach().double()
    return w[head * d : (head + 1) * d].T, w[
        C + head * d : C + (head + 1) * d
    ].T


def test_mimetic_vp_is_exact():
    torch.manual_seed(0)
    z = draw_mimetic_z(24)
    w_v, w_proj = mimetic_vp(z, alpha=0.4, beta=0.4)
    eye = torch.eye(24, dtype=torch.float64)
    torch.testing.assert_close(
        w_v @ w_proj, 0.4 * z - 0.4 * eye, rtol=0, atol=1e-12
    )


def test_mimetic_qk_is_the_best_rank_d_approximation():
    torch.manual_seed(0)
    C, d = 24, 8
    z = draw_mimetic_z(C)
    target = 0.7 * z + 0.7 * torch.eye(C, dtype=torch.float64)
    w_q, w_k = mimetic_qk(z, d)
    assert w_q.shape == w_k.shape == (C, d)
    product = w_q @ w_k.T
    assert torch.linalg.matrix_rank(product) == d
    error = torch.linalg.norm(product - target).item()
    assert error == pytest.approx(best_rank_error(target, d), rel=1e-10)
    # Symmetric factors: the singular values are split evenly.
    torch.testing.assert_close(w_q.norm(dim=0), w_k.norm(dim=0))


def test_mimetic_init_matches_the_drawn_z(build_classifier):
    model = build_classifier(backbone_cfg('ReLULinearAttention'))
    torch.manual_seed(42)
    mimetic_init_(model.backbone)
    torch.manual_seed(42)  # redraw in the documented order
    for layer in model.backbone.layers:
        attn = layer.attn
        C, h = attn.embed_dims, attn.num_heads
        eye = torch.eye(C, dtype=torch.float64)
        for head in range(h):
            z = torch.randn(C, C, dtype=torch.float64) / C**0.5
            w_q, w_k = head_weights(attn, head)
            target = 0.7 * z + 0.7 * eye
            error = torch.linalg.norm(w_q @ w_k.T - target).item()
            assert error == pytest.approx(
                best_rank_error(target, C // h), rel=1e-5
            )
        z = torch.randn(C, C, dtype=torch.float64) / C**0.5
        w_v = attn.qkv.weight.detach().double()[2 * C :].T
        w_proj = attn.proj.weight.detach().double().T
        torch.testing.assert_close(
            w_v @ w_proj, 0.4 * z - 0.4 * eye, rtol=0, atol=1e-5
        )
        assert not attn.qkv.bias.any() and not attn.proj.bias.any()


def test_shift_matrix():
    shift = shift_matrix((3, 4), (-1, 1))  # up and right
    expected = torch.zeros(12, 12, dtype=torch.float64)
    for r in range(1, 3):
        for c in range(3):
            expected[r * 4 + c, (r - 1) * 4 + c + 1] = 1
    assert torch.equal(shift, expected)


def impulse_attention(model, head):
    """Softmax attention of one head of layer 0 with LN(pos_embed) tokens."""
    attn = model.backbone.layers[0].attn
    tokens = F.layer_norm(
        model.backbone.pos_embed[0].detach().double(), (attn.embed_dims,)
    )
    w_q, w_k = head_weights(attn, head)
    logits = (tokens @ w_q) @ (tokens @ w_k).T * (w_q.shape[1]) ** -0.5
    return logits.softmax(-1)


def interior_peaks(attention, hw_shape, offset, extra=1):
    """Fraction of interior patches whose attention peaks at the patch
    ``offset`` away (token indices shifted by the class token)."""
    H, W = hw_shape
    hits = total = 0
    for r in range(1, H - 1):
        for c in range(1, W - 1):
            target = extra + (r + offset[0]) * W + c + offset[1]
            hits += int(attention[extra + r * W + c].argmax() == target)
            total += 1
    return hits / total


def test_impulse_heads_peak_at_their_taps(build_classifier):
    # Nine heads of width 28 >= the 25 patches of a 5x5 grid: the rank-d
    # targets are representable, so every interior patch must peak.
    arch = dict(
        embed_dims=252, num_layers=1, num_heads=9, feedforward_channels=64
    )
    cfg = backbone_cfg(arch=arch, img_size=40)
    fresh = build_classifier(cfg)
    model = build_classifier(cfg)
    torch.manual_seed(0)
    written = dict(impulse_init_(model.backbone))
    assert written['pos_embed'] == 26 * 252
    torch.testing.assert_close(
        model.backbone.pos_embed, 18 * fresh.backbone.pos_embed
    )
    for head, offset in enumerate(OFFSETS):
        attention = impulse_attention(model, head)
        assert interior_peaks(attention, (5, 5), offset) == 1.0, head
    attn = model.backbone.layers[0].attn
    assert not attn.qkv.bias.any() and not attn.proj.bias.any()


def test_impulse_at_deit_tiny_scale(build_classifier):
    # DeiT-T shapes (C=192, 3 heads, 14x14 grid): rank 64 < 196 patches, so
    # the pattern is approximate; nearly every interior patch still peaks.
    arch = dict(
        embed_dims=192, num_layers=1, num_heads=3, feedforward_channels=64
    )
    model = build_classifier(
        backbone_cfg(arch=arch, img_size=224, patch_size=16)
    )
    torch.manual_seed(0)
    impulse_init_(model.backbone)
    for head in range(3):
        attention = impulse_attention(model, head)
        assert interior_peaks(attention, (14, 14), OFFSETS[head]) > 0.95


def test_impulse_uses_the_fixed_sincos_table(build_classifier):
    model = build_classifier(backbone_cfg('MHLAttention'))
    torch.manual_seed(0)
    written = dict(impulse_init_(model.backbone))
    assert 'pos_embed' not in written  # nothing to scale
    attn = model.backbone.layers[0].attn
    table = model.backbone.position_embedding((4, 4))[0].double()
    tokens = F.layer_norm(table, (32,))
    for head in range(2):
        w_q, w_k = head_weights(attn, head)
        attention = ((tokens @ w_q) @ (tokens @ w_k).T).softmax(-1)
        assert interior_peaks(attention, (4, 4), OFFSETS[head], extra=0) == 1.0


@pytest.mark.parametrize('setting', ['Mimetic', 'Impulse'])
def test_not_applicable_to_ttt(setting, build_classifier, softmax_state):
    model = build_classifier(backbone_cfg('TTTAttention'))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(
        TransferError,
        match=rf'{setting} init does not apply: layers\.0\.'
        r'attn\.proj maps 48 -> 32 channels.*TTT',
    ):
        apply_init(model, softmax_state(), setting)
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_impulse_needs_a_position_embedding(build_classifier):
    model = build_classifier(backbone_cfg())
    model.backbone.pos_embed = None
    with pytest.raises(TransferError, match='needs a position embedding'):
        impulse_init_(model.backbone)


@pytest.mark.parametrize('setting', ['Mimetic', 'Impulse'])
def test_analytical_settings_leave_the_rest_at_fresh_init(
    setting, build_classifier, softmax_state
):
    cfg = backbone_cfg('ELULinearAttention')
    fresh = dict(build_classifier(cfg).named_parameters())
    model = build_classifier(cfg)
    report = apply_init(model, softmax_state(), setting)
    written = set(report.keys('analytical'))
    expected = {k for k in fresh if '.attn.qkv.' in k or '.attn.proj.' in k}
    if setting == 'Impulse':
        expected.add('backbone.pos_embed')
    assert written == expected
    for key, param in model.named_parameters():
        assert torch.equal(param, fresh[key]) == (key not in written), key
