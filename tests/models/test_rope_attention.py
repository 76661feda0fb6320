"""Operators and the backbone with rotary position embedding: each
operator that supports it against its float64 formula written out with
explicit rotation matrices, rope off unchanged, refusals with the fix."""

import pytest
import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS
from rope_oracle import random_angles, rotate, tables

from mmlvit.models.backbones import LinearVisionTransformer
from mmlvit.models.backbones.rope import AxialRope
from mmlvit.ops import inline_attention, kernel_linear_attention
from mmlvit.transfer import TransferError, impulse_init_

C, HEADS, HW = 16, 2, (2, 3)
D = C // HEADS
TINY = dict(
    embed_dims=C, num_layers=2, num_heads=HEADS, feedforward_channels=32
)


def module(type_name):
    torch.manual_seed(0)
    return MODELS.build(
        dict(type=type_name, embed_dims=C, num_heads=HEADS)
    ).double()


def inputs(half, cls=True, seed=1):
    g = torch.Generator().manual_seed(seed)
    P = HW[0] * HW[1]
    x = torch.randn(2, P + int(cls), C, generator=g, dtype=torch.float64)
    return x, tables(random_angles(P, D, seed), half)


def heads(m, x, rope):
    """q, k (rotated by the oracle), v: (B, h, N, d), split by hand."""
    y = x @ m.qkv.weight.T + m.qkv.bias
    B, N, _ = x.shape
    q, k, v = (
        y[..., i * C : (i + 1) * C].reshape(B, N, HEADS, D).transpose(1, 2)
        for i in range(3)
    )
    return rotate(q, rope), rotate(k, rope), v


def out(m, o):
    """proj(concat_heads(o)), o (B, h, N, d)."""
    B, h, N, d = o.shape
    return o.transpose(1, 2).reshape(B, N, h * d) @ m.proj.weight.T + (
        m.proj.bias
    )


def softmax_oracle(m, x, rope):
    q, k, v = heads(m, x, rope)
    return out(m, torch.softmax(q @ k.transpose(-2, -1) * D**-0.5, -1) @ v)


def kernel_oracle(phi):
    def oracle(m, x, rope):
        q, k, v = heads(m, x, torch_identity(rope))
        rq, rk = rotate(phi(q), rope), rotate(phi(k), rope)
        numerator = rq @ rk.transpose(-2, -1)
        den = phi(q) @ phi(k).transpose(-2, -1)
        return out(m, numerator @ v / (den.sum(-1, keepdim=True) + 1e-6))

    return oracle


def torch_identity(rope):
    """Tables of angle 0 (no rotation), for the unrotated projections."""
    return rope._replace(
        sin=torch.zeros_like(rope.sin), cos=torch.ones_like(rope.cos)
    )


def inline_oracle(m, x, rope):
    q, k, v = heads(m, x, rope)
    N, s = x.shape[1], D**-0.5
    k_bar, v_bar = k.mean(-2, keepdim=True), v.mean(-2, keepdim=True)
    o = s / N * q @ (k.transpose(-2, -1) @ v)
    return out(m, o + (1 - s * q @ k_bar.transpose(-2, -1)) * v_bar)


def gla_oracle(m, x, rope):
    """The bidirectional recurrence token by token on rotated q, k, then
    RMSNorm, the output gate and proj."""
    q, k, v = heads(m, x, rope)
    g_fwd, g_bwd = m.log_gates(x)
    N, s = x.shape[1], D**-0.5

    def scan(q, k, v, g):
        S = torch.zeros(*q.shape[:2], D, D, dtype=q.dtype)
        outs = []
        for t in range(N):
            S = g[:, :, t].exp().unsqueeze(-1) * S + (
                k[:, :, t].unsqueeze(-1) * v[:, :, t].unsqueeze(-2)
            )
            outs.append(s * (q[:, :, t].unsqueeze(-2) @ S).squeeze(-2))
        return torch.stack(outs, 2)

    flip = [t.flip(2) for t in (q, k, v, g_bwd)]
    o = (scan(q, k, v, g_fwd) + scan(*flip).flip(2)) / 2
    norm = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-5)
    gated = (norm * m.g_norm.weight).transpose(1, 2).reshape(x.shape)
    gated = gated * F.silu(x @ m.g_proj.weight.T)
    return gated @ m.proj.weight.T + m.proj.bias


ORACLES = {
    'SoftmaxAttention': softmax_oracle,
    'ELULinearAttention': kernel_oracle(lambda x: F.elu(x) + 1),
    'ReLULinearAttention': kernel_oracle(F.relu),
    'InLineAttention': inline_oracle,
    'GatedLinearAttention': gla_oracle,
}


@pytest.mark.parametrize('half', [False, True])
@pytest.mark.parametrize('type_name', sorted(ORACLES))
def test_operator_with_rope_equals_formula(type_name, half):
    m = module(type_name)
    assert m.supports_rope
    x, rope = inputs(half)
    expected = ORACLES[type_name](m, x, rope)
    torch.testing.assert_close(m(x, HW, rope=rope), expected)
    if m.output_is_map_times_values:
        # The map with rope is the one the forward applies.
        q, k, v = heads(m, x, torch_identity(rope))
        attn = m.attention_map(x, HW, rope=rope)
        torch.testing.assert_close(out(m, attn @ v), expected)


def test_rope_off_is_the_unrotated_operator():
    """Without tables the modules call their operators exactly as before
    (bit for bit)."""
    x, _ = inputs(False)
    for type_name, op in (
        ('ELULinearAttention', kernel_linear_attention),
        ('InLineAttention', inline_attention),
        ('SoftmaxAttention', F.scaled_dot_product_attention),
    ):
        m = module(type_name)
        q, k, v = m.split_heads(m.qkv(x))
        assert torch.equal(m(x, HW), m.output(m.merge_heads(op(q, k, v))))
        assert torch.equal(m(x, HW, rope=None), m(x, HW))


@pytest.mark.parametrize('type_name', ['MHLAttention', 'TTTAttention'])
def test_operators_without_rope_refuse_tables(type_name):
    m = MODELS.build(dict(type=type_name, embed_dims=C, num_heads=HEADS))
    assert not m.supports_rope
    x = torch.randn(1, 16, C)
    rope = AxialRope(D)((4, 4))
    with pytest.raises(ValueError, match='supports_rope is False'):
        m(x, (4, 4), rope=rope)


def backbone(attn, **kwargs):
    return LinearVisionTransformer(
        arch=TINY,
        img_size=32,
        patch_size=8,
        attn_cfg=dict(type=attn),
        out_type='raw',
        **kwargs,
    )


def test_backbone_rope_any_grid_no_weights_and_refusal():
    torch.manual_seed(0)
    plain = backbone('GatedLinearAttention').eval()
    rope = backbone('GatedLinearAttention', rope_cfg=dict(type='eva02')).eval()
    rope.load_state_dict(plain.state_dict())  # nothing new to load
    assert set(rope.state_dict()) == set(plain.state_dict())
    for size in (32, 48):
        img = torch.randn(1, 3, size, size)
        a, b = plain(img)[0], rope(img)[0]
        assert a.shape == b.shape and not torch.allclose(a, b)
    refusal = 'MHLAttention cannot apply rotary.*drop rope_cfg'
    with pytest.raises(ValueError, match=refusal):
        backbone('MHLAttention', rope_cfg=dict(type='eva02'))


def test_no_absolute_positions_with_pos_embed_type_none():
    """pos_embed_type='none' (RoPE-only models such as DINOv3): no table
    in the state dict, nothing added, so without RoPE the patch tokens are
    permutation-equivariant; Impulse, which needs a table, refuses."""
    torch.manual_seed(0)
    model = backbone('SoftmaxAttention', pos_embed_type='none').eval()
    assert 'pos_embed' not in model.state_dict()
    assert model.position_embedding((4, 4)) is None
    img = torch.randn(1, 3, 32, 32)
    # Swap the first and last 8-px patch rows: patches 0-3 <-> 12-15.
    swapped = torch.cat(
        [img[..., 24:, :], img[..., 8:24, :], img[..., :8, :]], 2
    )
    order = torch.cat(
        [torch.arange(12, 16), torch.arange(4, 12), torch.arange(4)]
    )
    with torch.no_grad():
        a, b = model(img)[0][:, 1:], model(swapped)[0][:, 1:]
    torch.testing.assert_close(b, a[:, order], rtol=0, atol=1e-6)
    with pytest.raises(TransferError, match='needs a position embedding'):
        impulse_init_(model)
