"""The contract every registered attention operator keeps: built from a
config dict, softmax parameter names, (B, N, C) in and out, class-token
handling, attention maps, mixed precision, gradients, FLOPs.

The operators and what each is checked for come from the registry and the
capabilities the operators state (``BaseAttention``'s class attributes), so
an operator registered anywhere before collection (a plugin, another
package) is checked without editing this file; see
``test_operator_registration.py``.
"""

import inspect

import pytest
import torch
from mmpretrain.models.utils import MultiheadAttention
from mmpretrain.registry import MODELS
from torch.utils._python_dispatch import TorchDispatchMode

import mmlvit  # noqa: F401
from mmlvit.models.attentions import BaseAttention, registered_operators

REGISTERED = registered_operators()
OPERATORS = list(REGISTERED)
LINEAR_OPERATORS = list(registered_operators(linear_cost=True))
# Operators whose output is exactly proj(concat_h(A_h v_h)).
PURE_MAP_OPERATORS = [
    n for n, c in REGISTERED.items() if c.output_is_map_times_values
]

C, HEADS, D = 32, 4, 8
HW = (4, 6)


def build(name, **kwargs):
    torch.manual_seed(0)
    return MODELS.build(
        dict(type=name, embed_dims=C, num_heads=HEADS, **kwargs)
    )


def tokens(name, hw_shape=HW, cls=None, B=2, scale=1.0, seed=1):
    """(B, N, C) tokens; a class token unless the operator takes none."""
    if cls is None:
        cls = not REGISTERED[name].patch_tokens_only
    g = torch.Generator().manual_seed(seed)
    N = hw_shape[0] * hw_shape[1] + int(cls)
    return scale * torch.randn(B, N, C, generator=g)


@pytest.mark.parametrize('name', OPERATORS)
def test_build_from_config_with_softmax_parameter_names(name):
    m = build(name)
    assert isinstance(m, BaseAttention)
    extra_rows = REGISTERED[name].extra_qkv_dims(C, HEADS)
    proj_in = REGISTERED[name].proj_in_dims(C, HEADS)
    assert m.qkv.weight.shape == (3 * C + extra_rows, C)
    assert m.qkv.bias.shape == (3 * C + extra_rows,)
    assert m.proj.weight.shape == (C, proj_in)
    assert m.proj.bias.shape == (C,)
    keys = m.state_dict().keys()
    for key in ('qkv.weight', 'qkv.bias', 'proj.weight', 'proj.bias'):
        assert key in keys
    assert build(name, qkv_bias=False).qkv.bias is None


@pytest.mark.parametrize('name', OPERATORS)
def test_heads_must_divide_embed_dims(name):
    with pytest.raises(ValueError, match='must divide'):
        MODELS.build(dict(type=name, embed_dims=30, num_heads=4))


@pytest.mark.parametrize('name', OPERATORS)
@pytest.mark.parametrize('hw_shape', [(4, 6), (5, 3)])
@pytest.mark.parametrize('cls', [True, False])
def test_tokens_in_tokens_out(name, hw_shape, cls):
    m = build(name)
    x = tokens(name, hw_shape, cls=cls)
    if cls and REGISTERED[name].patch_tokens_only:
        with pytest.raises(ValueError, match='class token'):
            m(x, hw_shape)
        return
    out = m(x, hw_shape)
    assert out.shape == x.shape and out.dtype == x.dtype
    assert torch.isfinite(out).all()


@pytest.mark.parametrize('name', OPERATORS)
def test_tokens_must_fit_the_grid(name):
    m = build(name)
    x = tokens(name, (4, 6))
    with pytest.raises(ValueError, match='patch grid'):
        m(x, (5, 6))
    if REGISTERED[name].has_attention_map:
        with pytest.raises(ValueError, match='patch grid'):
            m.attention_map(x, (5, 6))


def test_short_names_are_unique_lower_case():
    short_names = [c.short_name for c in REGISTERED.values()]
    assert all(n and n == n.lower() for n in short_names), short_names
    assert len(set(short_names)) == len(short_names)


@pytest.mark.parametrize('name', OPERATORS)
def test_attention_map_or_clear_error(name):
    m = build(name)
    x = tokens(name)
    if not REGISTERED[name].has_attention_map:
        with pytest.raises(NotImplementedError, match='never forms'):
            m.attention_map(x, HW)
        return
    attn = m.attention_map(x, HW)
    B, N, _ = x.shape
    assert attn.shape == (B, HEADS, N, N)
    assert torch.isfinite(attn).all()


@pytest.mark.parametrize('name', PURE_MAP_OPERATORS)
def test_forward_is_proj_of_map_times_values(name):
    m = build(name).double()
    x = tokens(name).double()
    B, N, _ = x.shape
    attn = m.attention_map(x, HW)
    v = m.qkv(x)[..., 2 * C :].reshape(B, N, HEADS, D).transpose(1, 2)
    mixed = (attn @ v).transpose(1, 2).reshape(B, N, C)
    torch.testing.assert_close(m(x, HW), m.proj(mixed), rtol=1e-10, atol=1e-12)


class _ShapeRecorder(TorchDispatchMode):
    """Records the shape of every tensor an op returns."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.shapes.append(tuple(t.shape))
        return out


@pytest.mark.parametrize('name', LINEAR_OPERATORS)
def test_linear_forward_never_forms_an_n_by_n_tensor(name):
    hw_shape = (8, 10)  # N = 80 or 81 tokens: more than a 64-token chunk
    m = build(name)
    x = tokens(name, hw_shape, B=1)
    N = x.shape[1]
    recorder = _ShapeRecorder()
    with recorder:
        m(x, hw_shape)
    assert recorder.shapes
    squares = [s for s in recorder.shapes if list(s).count(N) >= 2]
    assert not squares, f'{name} formed {squares}'
    # The recorder does see an N x N map when one is formed.
    with recorder:
        softmax_x = tokens(name, hw_shape, B=1)
        build('SoftmaxAttention').attention_map(softmax_x, hw_shape)
    assert [s for s in recorder.shapes if list(s).count(N) >= 2]


@pytest.mark.parametrize('name', OPERATORS)
def test_bf16_autocast_large_inputs_stay_finite(name):
    m = build(name)
    x = tokens(name, (7, 9), scale=1e3)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = m(x, (7, 9))
        out.float().square().mean().backward()
    assert torch.isfinite(out).all()
    for pname, p in m.named_parameters():
        assert torch.isfinite(p.grad).all(), pname


@pytest.mark.parametrize('name', OPERATORS)
def test_backward_reaches_every_parameter(name):
    m = build(name)
    x = tokens(name).requires_grad_()
    out = m(x, HW)
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))
    (out * weight).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    for pname, p in m.named_parameters():
        assert p.grad is not None, f'{pname} gets no gradient'
        assert torch.isfinite(p.grad).all(), pname
        if p.dim() >= 2:
            assert p.grad.abs().sum() > 0, f'{pname} gets a zero gradient'


@pytest.mark.parametrize('name', OPERATORS)
def test_empty_batch_gives_empty_output_and_gradients(name):
    """A batch of no images: (0, N, C) out, as softmax attention gives,
    and a backward that reaches every parameter (zero gradients). Where
    the operator takes a ``backend``, also with ``'triton'``: an empty
    batch launches no kernel (so not even on the CPU does it ask for
    CUDA)."""
    backends = [{}]
    if 'backend' in inspect.signature(REGISTERED[name]).parameters:
        backends.append(dict(backend='triton'))
    for kwargs in backends:
        m = build(name, **kwargs)
        x = tokens(name, B=0).requires_grad_()
        out = m(x, HW)
        assert out.shape == x.shape, kwargs
        out.sum().backward()
        assert x.grad.shape == x.shape, kwargs
        for pname, p in m.named_parameters():
            assert p.grad is not None and not p.grad.any(), (pname, kwargs)


@pytest.mark.parametrize('name', OPERATORS)
def test_flops_grow_linearly_for_linear_operators(name):
    m = MODELS.build(dict(type=name, embed_dims=768, num_heads=12))
    cls = int(not REGISTERED[name].patch_tokens_only)
    # N = 56 W (+1): equally spaced token counts.
    flops = [m.flops(56 * w + cls, (56, w)) for w in (28, 56, 84)]
    assert all(isinstance(f, int) and f > 0 for f in flops)
    second_difference = flops[2] - 2 * flops[1] + flops[0]
    if not REGISTERED[name].linear_cost:
        assert second_difference > 0  # the N^2 term
    else:
        assert second_difference == 0
        # Cheaper than softmax at 3137 tokens.
        softmax = MODELS.build(
            dict(type='SoftmaxAttention', embed_dims=768, num_heads=12)
        )
        assert flops[1] < softmax.flops(56 * 56 + 1, (56, 56))


def test_softmax_attention_equals_mmpretrain_multihead_attention():
    torch.manual_seed(0)
    reference = MultiheadAttention(embed_dims=C, num_heads=HEADS)
    m = build('SoftmaxAttention')
    m.load_state_dict(reference.state_dict(), strict=True)
    x = tokens('SoftmaxAttention', (14, 14))
    torch.testing.assert_close(m(x, (14, 14)), reference(x))
