"""MHLAttention and TTTAttention modules: layout, formulas, errors."""

import math

import pytest
import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from mmlvit.models.attentions import MHLAttention, TTTAttention
from mmlvit.ops import ttt_dwconv, ttt_swiglu

C, HEADS = 16, 4
D = C // HEADS
GRIDS = [(14, 14), (7, 9), (24, 24)]


def tokens(hw_shape, batch=2, extra=0, dtype=torch.float64, scale=1.0):
    N = hw_shape[0] * hw_shape[1] + extra
    return torch.randn(batch, N, C, dtype=dtype) * scale


def build(type_, **kwargs):
    torch.manual_seed(0)
    return MODELS.build(
        dict(type=type_, embed_dims=C, num_heads=HEADS, **kwargs)
    )


def heads(t):
    """(B, N, C) -> (B, h, N, d)."""
    B, N, _ = t.shape
    return t.reshape(B, N, HEADS, D).transpose(1, 2)


def merged(t):
    B, h, N, d = t.shape
    return t.transpose(1, 2).reshape(B, N, h * d)


# ------------------------------------------------------------------ MHLA --


def mhla_map(q, k, mixing, hw_shape):
    """A_tj = W[i(t), b(j)] phi(q_t).phi(k_j) / den_t with 7x7-style blocks
    of side ceil(H/2) x ceil(W/2), written from the spec."""
    H, W = hw_shape
    rows, cols = math.ceil(H / 2), math.ceil(W / 2)
    block = torch.tensor(
        [(r // rows) * 2 + c // cols for r in range(H) for c in range(W)]
    )
    phi_q, phi_k = torch.relu(q) + 1e-6, torch.relu(k) + 1e-6
    scores = (phi_q @ phi_k.transpose(-2, -1)) * mixing[block][:, block]
    return scores / (scores.sum(-1, keepdim=True) + 1e-6)


def test_mhla_parameters():
    attn = build('MHLAttention')
    assert isinstance(attn, MHLAttention)
    shapes = {k: tuple(v.shape) for k, v in attn.state_dict().items()}
    assert shapes == {
        'qkv.weight': (3 * C, C),
        'qkv.bias': (3 * C,),
        'proj.weight': (C, C),
        'proj.bias': (C,),
        'mixing': (4, 4),
        'lepe.weight': (C, 1, 5, 5),
        'lepe.bias': (C,),
    }
    c = 1 - 2**-0.5
    self_w, edge_w = 1 / (1 + 2 * c), c / (1 + 2 * c)
    expected = torch.tensor(
        [
            [self_w, edge_w, edge_w, 0],
            [edge_w, self_w, 0, edge_w],
            [edge_w, 0, self_w, edge_w],
            [0, edge_w, edge_w, self_w],
        ]
    )
    torch.testing.assert_close(attn.mixing.data, expected)
    assert round(self_w, 4) == 0.6306 and round(edge_w, 4) == 0.1847


@pytest.mark.parametrize('hw_shape', GRIDS)
def test_mhla_forward_is_proj_of_map_times_v_plus_lepe(hw_shape):
    attn = build('MHLAttention').double()
    with torch.no_grad():
        attn.mixing.uniform_(0, 1)  # not the symmetric init
    x = tokens(hw_shape)
    out = attn(x, hw_shape)
    assert out.shape == x.shape

    q, k, v = (heads(t) for t in attn.qkv(x).chunk(3, dim=-1))
    A = mhla_map(q, k, attn.mixing, hw_shape)
    v_grid = merged(v).transpose(1, 2).reshape(2, C, *hw_shape)
    lepe = (
        F.conv2d(v_grid, attn.lepe.weight, attn.lepe.bias, padding=2, groups=C)
        .flatten(2)
        .transpose(1, 2)
    )
    expected = attn.proj(merged(A @ v) + lepe)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(
        attn.attention_map(x, hw_shape), A, rtol=1e-12, atol=1e-12
    )


class LargestTensor(TorchDispatchMode):
    """Records the element count of the largest tensor any op returns."""

    def __init__(self):
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.numel = max(self.numel, t.numel())
        return out


def test_mhla_forward_never_forms_an_n_by_n_tensor():
    attn = build('MHLAttention')
    x = tokens((24, 24), batch=1, dtype=torch.float32)
    N = 576
    with LargestTensor() as forward:
        attn(x, (24, 24))
    assert forward.numel < N * N
    with LargestTensor() as analysis:
        attn.attention_map(x, (24, 24))
    assert analysis.numel >= HEADS * N * N  # the probe does see the map


def test_mhla_gradcheck():
    attn = build('MHLAttention').double()
    x = tokens((3, 5), batch=1).requires_grad_()
    # fast_mode: float64 depthwise convs take CPU's slow path.
    assert torch.autograd.gradcheck(
        lambda x: attn(x, (3, 5)), (x,), fast_mode=True
    )


# ------------------------------------------------------------------- TTT --


def test_ttt_parameters_and_init():
    attn = build('TTTAttention')
    assert isinstance(attn, TTTAttention)
    shapes = {k: tuple(v.shape) for k, v in attn.state_dict().items()}
    assert shapes == {
        'qkv.weight': (3 * C + 3 * D, C),
        'qkv.bias': (3 * C + 3 * D,),
        'proj.weight': (C, C + D),
        'proj.bias': (C,),
        'w1': (1, HEADS, D, D),
        'w2': (1, HEADS, D, D),
        'w3': (D, 1, 3, 3),
    }
    big = MODELS.build(dict(type='TTTAttention', embed_dims=192, num_heads=3))
    for name in ('qkv.weight', 'proj.weight', 'w1', 'w2'):
        param = big.get_parameter(name)
        assert abs(param.std().item() - 0.02) < 0.002, name
        assert param.abs().max() <= 2  # trunc_normal cuts at +-2
    assert (big.qkv.bias == 0).all() and (big.proj.bias == 0).all()


@pytest.mark.parametrize('hw_shape', GRIDS)
def test_ttt_forward_follows_the_qkv_row_layout(hw_shape):
    """qkv rows [q1 C | k1 C | v1 C | q2 d | k2 d | v2 d]; output
    proj(concat[SwiGLU heads, conv head])."""
    attn = build('TTTAttention').double()
    x = tokens(hw_shape)
    out = attn(x, hw_shape)
    assert out.shape == x.shape

    rows = attn.qkv(x).split([C, C, C, D, D, D], dim=-1)
    q1, k1, v1 = (heads(t) for t in rows[:3])
    q2, k2, v2 = (t.transpose(1, 2).reshape(2, D, *hw_shape) for t in rows[3:])
    swiglu_out = merged(ttt_swiglu(q1, k1, v1, attn.w1, attn.w2))
    conv_out = ttt_dwconv(q2, k2, v2, attn.w3).flatten(2).transpose(1, 2)
    expected = attn.proj(torch.cat([swiglu_out, conv_out], -1))
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)


def test_ttt_has_no_attention_map():
    attn = build('TTTAttention')
    with pytest.raises(NotImplementedError, match='never forms an N x N'):
        attn.attention_map(tokens((4, 4), dtype=torch.float32), (4, 4))


def test_ttt_gradcheck():
    attn = build('TTTAttention').double()
    with torch.no_grad():  # O(1) weights so every path has real gradients
        for p in attn.parameters():
            p.normal_(0, 0.5)
    x = tokens((3, 4), batch=1).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x: attn(x, (3, 4)), (x,), fast_mode=True
    )


# ------------------------------------------------------------------ both --


@pytest.mark.parametrize('type_', ['MHLAttention', 'TTTAttention'])
def test_class_token_is_rejected(type_):
    attn = build(type_)
    x = tokens((4, 4), extra=1, dtype=torch.float32)
    with pytest.raises(ValueError, match='with_cls_token=False'):
        attn(x, (4, 4))
    if type_ == 'MHLAttention':
        with pytest.raises(ValueError, match='with_cls_token=False'):
            attn.attention_map(x, (4, 4))
    # Class and register tokens (as a backbone would declare them): refused
    # the same way.
    attn.prefix_tokens = 3
    with pytest.raises(ValueError, match='got 3 tokens before the patches'):
        attn(tokens((4, 4), extra=3, dtype=torch.float32), (4, 4))
    with pytest.raises(ValueError, match='expected the 16 patches after 3'):
        attn(tokens((4, 4), extra=4, dtype=torch.float32), (4, 4))


@pytest.mark.parametrize('type_', ['MHLAttention', 'TTTAttention'])
def test_attn_drop_is_rejected(type_):
    with pytest.raises(ValueError, match='attn_drop'):
        build(type_, attn_drop=0.1)


@pytest.mark.parametrize('type_', ['MHLAttention', 'TTTAttention'])
def test_flops_count_every_product(type_):
    """flops() against torch's FLOP counter on the real forward (which
    counts matmuls and convs, 2 per multiply-add). MHLA also counts its
    key sums and TTT its 3x3 per-sample conv and its gradient (nine
    token-wise multiply-adds each), which the counter skips."""
    attn = build(type_)
    for hw_shape in [(14, 14), (24, 24)]:
        N = hw_shape[0] * hw_shape[1]
        counter = FlopCounterMode(display=False)
        with counter:
            attn(tokens(hw_shape, batch=1, dtype=torch.float32), hw_shape)
        uncounted = 2 * N * C if type_ == 'MHLAttention' else 0
        if type_ == 'TTTAttention':
            uncounted = 2 * 2 * N * attn.head_dims * 9
        assert attn.flops(N, hw_shape) == counter.get_total_flops() + uncounted


@pytest.mark.parametrize('type_', ['MHLAttention', 'TTTAttention'])
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_autocast_large_inputs_stay_finite(type_, dtype):
    """Finite outputs and gradients, close to float32. Heads of d = 32: with
    tiny heads a ReLU query can flip between all-zero and not under 16-bit
    rounding, which changes the exact function, not the numerics."""
    torch.manual_seed(0)
    attn = MODELS.build(dict(type=type_, embed_dims=64, num_heads=2))
    scale = 100.0 if dtype == torch.bfloat16 else 10.0
    x = torch.randn(2, 576, 64) * scale
    with torch.autocast('cpu', dtype=dtype):
        out = attn(x, (24, 24))
    assert out.dtype == dtype and torch.isfinite(out).all()
    reference = attn(x, (24, 24))
    err = (out.float() - reference).abs().max() / reference.abs().max()
    assert err < 0.05
    out.float().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in attn.parameters())


def test_ttt_keeps_only_its_inputs_for_backward():
    """Both inner models are recomputed in backward (test_ttt_gradcheck
    checks the gradients through it): the module keeps about its input and
    the qkv output, not the N-sized fp32 intermediates of the inner step
    (about 4x more without recomputation)."""
    attn = build('TTTAttention')
    x = tokens((16, 16), dtype=torch.float32).requires_grad_()
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        attn(x, (16, 16))
    x_bytes = x.numel() * x.element_size()
    qkv_bytes = x_bytes * attn.qkv.out_features / attn.embed_dims
    assert sum(saved) < 2 * (x_bytes + qkv_bytes)
