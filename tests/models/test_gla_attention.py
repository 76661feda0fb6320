"""GatedLinearAttention against a float64 oracle written out from
docs/operators.md, GLA (gates, bidirectional decays, RMSNorm, output gate),
its attention map, options and mixed precision."""

import pytest
import torch
import torch.nn.functional as F
from mmpretrain.models.utils import MultiheadAttention
from mmpretrain.registry import MODELS
from torch.utils.flop_counter import FlopCounterMode

import mmlvit  # noqa: F401

C, HEADS, D = 32, 4, 8


def build(**kwargs):
    torch.manual_seed(0)
    return MODELS.build(
        dict(type='GatedLinearAttention', embed_dims=C, num_heads=HEADS)
        | kwargs
    )


def tokens(hw_shape, cls, B=2, scale=1.0, seed=1):
    gen = torch.Generator().manual_seed(seed)
    N = hw_shape[0] * hw_shape[1] + int(cls)
    return scale * torch.randn(B, N, C, generator=gen)


def randomise(m):
    """Non-trivial values for every parameter (zero biases and a unit
    norm weight would hide mistakes)."""
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.3)
        m.g_norm.weight.add_(1)
    return m


def oracle(m, x):
    """The module's function in float64, written from the spec: returns the
    output and the pre-norm scan output o (B, h, N, d)."""
    B, N, _ = x.shape
    heads = (B, N, HEADS, D)
    qkv = x @ m.qkv.weight.T + m.qkv.bias
    q, k, v = (t.reshape(heads).transpose(1, 2) for t in qkv.split(C, -1))
    logits = (x @ m.gate_down.weight.T) @ m.gate_up.weight.T + m.gate_up.bias
    log_alpha = torch.log(torch.sigmoid(logits)) / 16
    g_f, g_b = (
        t.reshape(heads).transpose(1, 2) for t in log_alpha.split(C, -1)
    )
    # Direct sums over the decays: cumulative gates, masked differences.
    Gf, Gb = g_f.cumsum(2), g_b.cumsum(2)
    t_idx = torch.arange(N)
    past = (t_idx[None, :] <= t_idx[:, None])[None, None, :, :, None]
    # sum_{r=s+1}^t g^f_r = Gf_t - Gf_s ; sum_{r=t}^{s-1} g^b_r = Gb_{s-1}
    # - Gb_{t-1} = (Gb_s - g^b_s) - (Gb_t - g^b_t).
    ef = Gf[:, :, :, None] - Gf[:, :, None]
    eb = (Gb - g_b)[:, :, None] - (Gb - g_b)[:, :, :, None]
    zero = torch.zeros((), dtype=x.dtype)
    df = torch.where(past, ef.clamp(max=0).exp(), zero)
    db = torch.where(past.transpose(2, 3), eb.clamp(max=0).exp(), zero)
    qk = q[:, :, :, None] * k[:, :, None] * D**-0.5  # (B, h, t, s, d)
    attn = ((df + db) * qk).sum(-1) / 2
    o = attn @ v
    normed = o / (o.square().mean(-1, keepdim=True) + 1e-5).sqrt()
    normed = normed * m.g_norm.weight
    gate = x @ m.g_proj.weight.T
    y = normed.transpose(1, 2).reshape(B, N, C) * gate * torch.sigmoid(gate)
    return y @ m.proj.weight.T + m.proj.bias, o, attn


def test_parameters_keep_softmax_names_and_follow_the_spec():
    m = build()
    shapes = {k: tuple(p.shape) for k, p in m.named_parameters()}
    assert shapes == {
        'qkv.weight': (3 * C, C),
        'qkv.bias': (3 * C,),
        'proj.weight': (C, C),
        'proj.bias': (C,),
        'gate_down.weight': (16, C),
        'gate_up.weight': (2 * C, 16),
        'gate_up.bias': (2 * C,),
        'g_proj.weight': (C, C),
        'g_norm.weight': (D,),
    }
    assert m.g_norm.eps == 1e-5
    # A softmax checkpoint copies into qkv and proj by name and shape.
    softmax = MultiheadAttention(embed_dims=C, num_heads=HEADS)
    missing, unexpected = m.load_state_dict(softmax.state_dict(), strict=False)
    assert not unexpected
    assert sorted(missing) == sorted(
        k for k in shapes if k.split('.')[0] not in ('qkv', 'proj')
    )


def test_init_gives_gates_near_half_to_the_one_sixteenth():
    m = MODELS.build(
        dict(type='GatedLinearAttention', embed_dims=192, num_heads=3)
    )
    for layer in (m.qkv, m.proj, m.gate_down, m.gate_up, m.g_proj):
        assert abs(layer.weight.std().item() - 0.02) < 0.002
        if layer.bias is not None:
            assert not layer.bias.any()
    assert torch.equal(m.g_norm.weight, torch.ones(64))
    x = torch.randn(2, 197, 192, generator=torch.Generator().manual_seed(0))
    g_fwd, g_bwd = m.log_gates(x)
    assert g_fwd.shape == g_bwd.shape == (2, 3, 197, 64)
    alpha = torch.cat([g_fwd, g_bwd]).exp()
    assert (alpha <= 1).all()
    torch.testing.assert_close(
        alpha.mean(), torch.tensor(0.5 ** (1 / 16)), atol=2e-3, rtol=0
    )


@pytest.mark.parametrize('hw_shape', [(14, 14), (7, 9)])
@pytest.mark.parametrize('cls', [True, False])
def test_forward_equals_explicit_formula(hw_shape, cls):
    m = randomise(build(backend='torch')).double()
    x = tokens(hw_shape, cls).double()
    expected, _, _ = oracle(m, x)
    torch.testing.assert_close(m(x, hw_shape), expected, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize('cls', [True, False])
def test_attention_map_reproduces_output_before_norm_and_gate(cls):
    m = randomise(build()).double()
    x = tokens((7, 9), cls).double()
    B, N, _ = x.shape
    expected, o, expected_attn = oracle(m, x)
    attn = m.attention_map(x, (7, 9))
    assert attn.shape == (B, HEADS, N, N)
    torch.testing.assert_close(attn, expected_attn, rtol=1e-9, atol=1e-11)
    v = m.qkv(x)[..., 2 * C :].reshape(B, N, HEADS, D).transpose(1, 2)
    torch.testing.assert_close(attn @ v, o, rtol=1e-9, atol=1e-11)
    # Norm and gate then give the output; the map alone does not.
    gate = m.g_proj(x)
    normed = m.merge_heads(m.g_norm(attn @ v)) * F.silu(gate)
    torch.testing.assert_close(m.proj(normed), m(x, (7, 9)))
    assert not torch.allclose(m.proj(m.merge_heads(attn @ v)), m(x, (7, 9)))


def test_chunk_size_changes_nothing():
    m = randomise(build()).double()
    x = tokens((7, 9), cls=True).double()
    m8 = randomise(build(chunk_size=8)).double()
    torch.testing.assert_close(m8(x, (7, 9)), m(x, (7, 9)), rtol=1e-10, atol=0)


def test_gradcheck():
    torch.manual_seed(0)
    m = MODELS.build(
        dict(
            type='GatedLinearAttention',
            embed_dims=8,
            num_heads=2,
            gate_low_rank=4,
            chunk_size=2,
        )
    )
    m = randomise(m).double()
    x = torch.randn(1, 7, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda t: m(t, (2, 3)), (x,), fast_mode=True
    )


@pytest.mark.parametrize('scale', [1.0, 1e4])
def test_bf16_autocast_stays_finite(scale):
    m = build()
    x = tokens((14, 14), cls=True, scale=scale)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = m(x, (14, 14))
        attn = m.attention_map(x, (14, 14))
    assert torch.isfinite(out).all() and torch.isfinite(attn).all()
    out.float().square().mean().backward()
    for name, p in m.named_parameters():
        assert torch.isfinite(p.grad).all(), name
    if scale == 1.0:
        torch.testing.assert_close(
            out.float(), m(x, (14, 14)), rtol=0.05, atol=0.02
        )


def test_fp16_autocast_stays_finite():
    m = build()
    x = tokens((7, 9), cls=True, scale=30.0)
    with torch.autocast('cpu', dtype=torch.float16):
        out = m(x, (7, 9))
    assert out.dtype == torch.float16
    assert torch.isfinite(out).all()


def test_bad_options_raise():
    with pytest.raises(ValueError, match='attn_drop must be 0'):
        build(attn_drop=0.1)
    with pytest.raises(ValueError, match='Unknown GLA backend'):
        build(backend='cuda')
    m = build(chunk_size=24)
    with pytest.raises(ValueError, match='power of two'):
        m(tokens((2, 2), cls=False), (2, 2))
    with pytest.raises(ValueError, match='patch grid'):
        build()(tokens((2, 3), cls=True), (3, 3))


def test_fla_backend_on_cpu_raises_clearly():
    m = build(backend='fla')
    with pytest.raises(RuntimeError, match='need CUDA'):
        m(tokens((2, 2), cls=True), (2, 2))


def test_flops_match_the_matrix_products_executed():
    """flops() against torch's FLOP counter on a forward of N = 256 tokens
    (four whole chunks of L = 64, no padding). flops() counts the causal
    half of each chunk's scores, diagonal included; the path forms the full
    L x L product, L (L - 1) / 2 more multiply-adds per chunk and head
    dimension: N d (L - 1) / 2 per head and direction."""
    m = MODELS.build(
        dict(
            type='GatedLinearAttention',
            embed_dims=64,
            num_heads=2,
            backend='torch',
        )
    )
    N = 256
    x = torch.randn(1, N, 64)
    with FlopCounterMode(display=False) as counter:
        m(x, (16, 16))
    masked = 2 * 2 * N * 64 * (64 - 1) // 2  # 2 FLOPs x 2 directions x h d
    assert m.flops(N, (16, 16)) + masked == counter.get_total_flops()


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason='fla kernels need CUDA'
)
def test_auto_backend_on_cuda_matches_torch_backend():
    m = build().cuda()
    m_torch = build(backend='torch').cuda()
    x = tokens((14, 14), cls=True).cuda()
    out = m(x, (14, 14))
    ref = m_torch(x, (14, 14))
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)


def test_gates_and_output_norm_are_recomputed_in_backward(monkeypatch):
    """The fp32 gates and output norm keep only their inputs for backward:
    far fewer saved bytes than without recomputation, same gradients."""
    from mmlvit.ops.common import recompute

    def saved_bytes_and_grad():
        torch.manual_seed(0)
        attn = MODELS.build(
            dict(type='GatedLinearAttention', embed_dims=32, num_heads=2)
        )
        x = torch.randn(2, 65, 32, requires_grad=True)
        saved = []

        def pack(t):
            saved.append(t.numel() * t.element_size())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = attn(x, (8, 8))
        out.square().sum().backward()
        return sum(saved), x.grad, attn.gate_up.weight.grad

    recomputed_bytes, grad, gate_grad = saved_bytes_and_grad()
    monkeypatch.setattr(recompute, 'checkpoint', lambda fn, *a, **k: fn(*a))
    plain_bytes, plain_grad, plain_gate_grad = saved_bytes_and_grad()
    assert recomputed_bytes < 0.7 * plain_bytes
    torch.testing.assert_close(grad, plain_grad)
    torch.testing.assert_close(gate_grad, plain_gate_grad)
