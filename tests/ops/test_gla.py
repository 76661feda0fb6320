"""Gated linear attention (mmlvit.ops.gla), PyTorch path and references,
against float64 oracles written out from docs/operators.md (GLA) and
against fla's naive recurrent reference. The fla backend: test_gla_fla.py.
"""

import functools

import pytest
import torch
from fla.ops.gla.naive import naive_recurrent_gla
from gla_inputs import grads, inputs

import mmlvit.ops.gla as dispatch
import mmlvit.ops.gla.chunk as chunk_ops
import mmlvit.ops.gla.chunk as workspace
from mmlvit.ops import (
    bidirectional_gla,
    bidirectional_gla_map,
    gla_chunked,
    gla_recurrent,
)

F64 = dict(rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('path', ['bidirectional_fla', 'bidirectional_triton'])
def test_auto_backend_on_cpu_takes_the_torch_path(path, monkeypatch):
    def fail(*args):
        raise AssertionError(f'{path} taken on CPU')

    monkeypatch.setattr(dispatch, path, fail)
    q, k, v, g = inputs(T=9)
    bidirectional_gla(q, k, v, g, g)  # backend='auto'


def explicit_causal(q, k, v, g, scale):
    """o_t = scale sum_{s<=t} sum_c q_tc k_sc prod_{r=s+1}^t alpha_rc v_s,
    every decay summed term by term (no cumulative sums)."""
    T = q.shape[2]
    rows = []
    for t in range(T):
        o_t = 0
        for s in range(t + 1):
            decay = g[:, :, s + 1 : t + 1].sum(2).exp()  # (B, H, d)
            score = (q[:, :, t] * k[:, :, s] * decay).sum(-1, keepdim=True)
            o_t = o_t + scale * score * v[:, :, s]
        rows.append(o_t)
    return torch.stack(rows, dim=2)


def explicit_map(q, k, g_fwd, g_bwd, scale):
    """docs/operators.md (GLA), entry by entry:
    A^f_ts = s sum_c q_tc k_sc exp(sum_{r=s+1}^t g^f_rc), s <= t;
    A^b_ts = s sum_c q_tc k_sc exp(sum_{r=t}^{s-1} g^b_rc), s >= t;
    A = (A^f + A^b) / 2."""
    B, H, T, _ = q.shape
    attn = torch.zeros(B, H, T, T, dtype=q.dtype)
    for t in range(T):
        for s in range(T):
            dot = q[:, :, t] * k[:, :, s] * scale
            if s <= t:
                decay = g_fwd[:, :, s + 1 : t + 1].sum(2).exp()
                attn[:, :, t, s] += (dot * decay).sum(-1) / 2
            if s >= t:
                decay = g_bwd[:, :, t:s].sum(2).exp()
                attn[:, :, t, s] += (dot * decay).sum(-1) / 2
    return attn


def fla_naive(q, k, v, g, scale):
    """fla's reference in our layout: it takes (B, T, H, d), runs in fp32
    and always scales by d^-1/2, so q is rescaled to give ``scale``."""
    d = q.shape[-1]
    q = q * (scale * d**0.5)
    o, _ = naive_recurrent_gla(*(t.transpose(1, 2) for t in (q, k, v, g)))
    return o.transpose(1, 2)


# ----------------------------------------------------------- causal scans


def test_recurrent_equals_explicit_formula():
    q, k, v, g = inputs(B=1, H=2, T=9, d=3, dv=5)
    torch.testing.assert_close(
        gla_recurrent(q, k, v, g, scale=0.7),
        explicit_causal(q, k, v, g, 0.7),
        **F64,
    )


@pytest.mark.parametrize('chunk_size', [1, 2, 4, 8, 16, 64])
def test_chunked_equals_explicit_formula(chunk_size):
    # T = 13 is divided by none of the chunk sizes but 1.
    q, k, v, g = inputs(B=1, H=2, T=13, d=3, dv=5)
    torch.testing.assert_close(
        gla_chunked(q, k, v, g, scale=0.7, chunk_size=chunk_size),
        explicit_causal(q, k, v, g, 0.7),
        **F64,
    )


@pytest.mark.parametrize('T', [1, 37, 64, 130])
@pytest.mark.parametrize('chunk_size', [4, 16, 64])
def test_chunked_equals_recurrent(T, chunk_size):
    q, k, v, g = inputs(T=T, dv=6)
    torch.testing.assert_close(
        gla_chunked(q, k, v, g, chunk_size=chunk_size),
        gla_recurrent(q, k, v, g),
        **F64,
    )


@pytest.mark.parametrize('scale', [None, 0.3])
def test_scans_equal_fla_naive_reference(scale):
    q, k, v, g = inputs(T=70, d=8, dtype=torch.float32)
    expected = fla_naive(q, k, v, g, 8**-0.5 if scale is None else scale)
    for scan in (gla_recurrent, gla_chunked):
        torch.testing.assert_close(
            scan(q, k, v, g, scale=scale), expected, rtol=1e-4, atol=1e-5
        )


def test_default_scale_is_inverse_sqrt_head_dim():
    q, k, v, g = inputs(d=9)
    torch.testing.assert_close(
        gla_chunked(q, k, v, g), gla_chunked(q, k, v, g, scale=1 / 3), **F64
    )


def test_chunked_survives_vanishing_gates():
    """Decays down to exp(-400) per token: every exponent the chunked scan
    takes is a non-positive difference, so nothing overflows (a
    factorisation through exp(-cumsum(g)) would give inf * 0 = NaN, in
    float64 as well)."""
    q, k, v, _ = inputs(T=50)
    g = -400 * torch.rand(q.shape, generator=torch.Generator().manual_seed(3))
    out = gla_chunked(q, k, v, g)
    torch.testing.assert_close(out, gla_recurrent(q, k, v, g), **F64)
    for a, b in zip(
        grads(gla_chunked, (q, k, v, g)), grads(gla_recurrent, (q, k, v, g))
    ):
        torch.testing.assert_close(a, b, **F64)
    inputs32 = [t.float() for t in (q, k, v, g)]
    assert torch.isfinite(gla_chunked(*inputs32)).all()
    assert all(torch.isfinite(t).all() for t in grads(gla_chunked, inputs32))


def chunk_sizes_used(monkeypatch):
    """Records the chunk size of every chunk layout the scans build."""
    sizes = []

    class Recording(chunk_ops.ChunkGroups):
        def __init__(self, shape, L, *args):
            sizes.append(L)
            super().__init__(shape, L, *args)

    monkeypatch.setattr(chunk_ops, 'ChunkGroups', Recording)
    return sizes


def test_ordinary_gates_keep_the_chunk_size(monkeypatch):
    """Gates of the GLA module's range (log-sigmoid / 16 >= about -0.3)
    never span MAX_CHUNK_LOG_DECAY in 64 tokens: one layout, chunk 64."""
    sizes = chunk_sizes_used(monkeypatch)
    q, k, v, g = inputs(T=200)
    gla_chunked(q, k, v, g / 16)
    assert sizes == [64]


@pytest.mark.parametrize('log_gate', [-1.0, -3.0])
def test_strong_gates_halve_the_chunk_and_stay_exact_in_fp32(
    monkeypatch, log_gate
):
    """Log-gates of -1 and -3 per token span 63 and 189 over a chunk of 64,
    past fp32's exp(88): the chunk halves until the span is <= 40 (32 and
    8 tokens), and the fp32 result matches the fp64 recurrence."""
    sizes = chunk_sizes_used(monkeypatch)
    q, k, v, _ = inputs(T=150, dv=5)
    noise = torch.rand(q.shape, generator=torch.Generator().manual_seed(4))
    g = log_gate * (0.9 + 0.1 * noise)
    tensors32 = [t.float() for t in (q, k, v, g)]
    out = gla_chunked(*tensors32)
    assert sizes[-1] == {-1.0: 32, -3.0: 8}[log_gate]
    expected = gla_recurrent(q, k, v, g)
    torch.testing.assert_close(out, expected.float(), rtol=1e-4, atol=1e-5)
    for got, want in zip(
        grads(gla_chunked, tensors32), grads(gla_recurrent, (q, k, v, g))
    ):
        torch.testing.assert_close(got, want.float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('chunk_size', [1, 4, 16, 64])
def test_chunked_gradients_equal_recurrent_gradients(chunk_size):
    """The written-out backward (dg from q * dq - k * dk) against autograd
    through the recurrence, T = 37 not divided by the chunk."""
    tensors = inputs(T=37, dv=5)
    expected = grads(gla_recurrent, tensors)
    got = grads(lambda *a: gla_chunked(*a, chunk_size=chunk_size), tensors)
    for name, a, b in zip('q k v g'.split(), got, expected):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=name)


def groups_used(monkeypatch):
    """Records (chunks per group, groups) of every scan pass."""
    used = []

    class Recording(chunk_ops.ChunkGroups):
        def __init__(self, *args):
            super().__init__(*args)
            used.append((self.c, self.G))

    monkeypatch.setattr(chunk_ops, 'ChunkGroups', Recording)
    return used


@pytest.mark.parametrize('chunks_per_group', [1, 3])
def test_scans_carry_state_and_gradients_across_groups(
    monkeypatch, chunks_per_group
):
    """37 tokens in chunks of 4 (10 chunks) scanned as 10 groups of 1 or 4
    groups of 3 (the last one padded): the states carried forwards and the
    gradients carried backwards from group to group give the oracles'
    outputs and gradients, in both directions."""
    B, H, T, d, L = 2, 3, 37, 4, 4
    used = groups_used(monkeypatch)
    tensors = inputs(B=B, H=H, T=T, d=d, dv=5, gate=2)
    q, k, v, g_fwd, g_bwd = tensors
    # One workspace holds GROUP_ELEMENTS = D B H (c L) d elements.
    for D in (1, 2):
        elements = D * B * H * chunks_per_group * L * d
        monkeypatch.setattr(workspace, 'GROUP_ELEMENTS', elements)
        if D == 1:
            scan = functools.partial(gla_chunked, chunk_size=L)
            oracle, args = gla_recurrent, (q, k, v, g_fwd)
        else:
            scan = functools.partial(
                bidirectional_gla, backend='torch', chunk_size=L
            )

            def oracle(q, k, v, g_fwd, g_bwd):
                return bidirectional_gla_map(q, k, g_fwd, g_bwd) @ v

            args = tensors
        torch.testing.assert_close(scan(*args), oracle(*args), **F64)
        for a, b in zip(grads(scan, args), grads(oracle, args)):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)
    groups = -(-10 // chunks_per_group)
    assert set(used) == {(chunks_per_group, groups)}


def test_chunked_gradcheck():
    q, k, v, g = inputs(B=1, H=1, T=11, d=2, dv=3)
    tensors = [t.requires_grad_() for t in (q, k, v, g)]
    assert torch.autograd.gradcheck(
        lambda *a: gla_chunked(*a, chunk_size=4), tensors
    )


def test_bidirectional_gradcheck():
    tensors = [
        t.requires_grad_() for t in inputs(B=1, H=1, T=7, d=2, dv=2, gate=2)
    ]
    assert torch.autograd.gradcheck(
        lambda *a: bidirectional_gla(*a, backend='torch', chunk_size=2),
        tensors,
    )


# ------------------------------------------------------- bidirectional


def test_bidirectional_is_forward_plus_reversed_fla_scan():
    q, k, v, g_fwd, g_bwd = inputs(T=45, d=8, dtype=torch.float32, gate=2)
    scale = 8**-0.5
    forward = fla_naive(q, k, v, g_fwd, scale)
    reversed_ = fla_naive(*(t.flip(2) for t in (q, k, v, g_bwd)), scale)
    torch.testing.assert_close(
        bidirectional_gla(q, k, v, g_fwd, g_bwd, backend='torch'),
        (forward + reversed_.flip(2)) / 2,
        rtol=1e-4,
        atol=1e-5,
    )


def test_map_equals_explicit_formula():
    q, k, _, g_fwd, g_bwd = inputs(B=1, H=2, T=8, d=3, gate=2)
    torch.testing.assert_close(
        bidirectional_gla_map(q, k, g_fwd, g_bwd, scale=0.6),
        explicit_map(q, k, g_fwd, g_bwd, 0.6),
        **F64,
    )


@pytest.mark.parametrize('chunk_size', [8, 64])
def test_bidirectional_output_equals_map_times_values(chunk_size):
    q, k, v, g_fwd, g_bwd = inputs(T=37, dv=5, gate=2)
    attn = bidirectional_gla_map(q, k, g_fwd, g_bwd)
    assert attn.shape == (2, 3, 37, 37)
    out = bidirectional_gla(
        q, k, v, g_fwd, g_bwd, backend='torch', chunk_size=chunk_size
    )
    torch.testing.assert_close(out, attn @ v, **F64)


@pytest.mark.parametrize('chunk_size', [8, 64])
def test_bidirectional_gradients_equal_map_gradients(chunk_size):
    """The written-out backward of both scans (the reversed one padded at
    its start) against autograd through the explicit map, T = 37."""
    tensors = inputs(T=37, dv=5, gate=2)

    def through_map(q, k, v, g_fwd, g_bwd):
        return bidirectional_gla_map(q, k, g_fwd, g_bwd) @ v

    def chunked(*args):
        return bidirectional_gla(*args, backend='torch', chunk_size=chunk_size)

    for name, a, b in zip(
        'q k v g_fwd g_bwd'.split(),
        grads(chunked, tensors),
        grads(through_map, tensors),
    ):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=name)


def test_map_survives_vanishing_gates():
    q, k, _, _ = inputs(T=30, dtype=torch.float32)
    g = torch.full(q.shape, -300.0)
    attn = bidirectional_gla_map(q, k, g, g)
    assert torch.isfinite(attn).all()
    # Only the diagonal (no decay) survives: A_tt = scale q_t . k_t.
    diag = (q * k).sum(-1) * q.shape[-1] ** -0.5
    torch.testing.assert_close(attn, torch.diag_embed(diag))


# ------------------------------------------------------ mixed precision


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_low_precision_inputs_stay_finite_and_keep_dtype(dtype):
    q, k, v, g_fwd, g_bwd = inputs(T=100, d=8, dtype=torch.float32, gate=2)
    big = 10 if dtype is torch.float16 else 1e4
    low = [t.to(dtype) for t in (q * big, k * big, v)] + [g_fwd, g_bwd]
    for out in (
        gla_chunked(*low[:4]),
        gla_recurrent(*low[:4]),
        bidirectional_gla(*low, backend='torch'),
        bidirectional_gla_map(low[0], low[1], g_fwd, g_bwd),
    ):
        assert out.dtype == dtype
        assert torch.isfinite(out).all()
    # Computed in fp32 internally: equal to the fp32 scan of the same
    # (rounded) inputs, up to the final rounding.
    ref = bidirectional_gla(*(t.float() for t in low), backend='torch')
    torch.testing.assert_close(
        bidirectional_gla(*low, backend='torch').float(),
        ref,
        rtol=1e-2,
        atol=1e-2 * ref.abs().max().item(),
    )


def test_bf16_autocast_large_magnitude_stays_finite():
    q, k, v, g_fwd, g_bwd = inputs(T=100, d=8, dtype=torch.float32, gate=2)
    tensors = [t.requires_grad_() for t in (q * 1e4, k * 1e4, v * 1e4)]
    with torch.autocast('cpu', dtype=torch.bfloat16):
        # Under autocast the projections hand over bf16 q, k, v.
        low = [t.to(torch.bfloat16) for t in tensors]
        out = bidirectional_gla(*low, g_fwd, g_bwd, backend='torch')
    assert out.dtype == torch.bfloat16
    assert torch.isfinite(out).all()
    out.float().square().mean().backward()
    for t in tensors:
        assert torch.isfinite(t.grad).all()


# --------------------------------------------------------------- errors


def test_bad_arguments_raise():
    q, k, v, g = inputs()
    with pytest.raises(ValueError, match='power of two'):
        gla_chunked(q, k, v, g, chunk_size=12)
    with pytest.raises(ValueError, match='power of two'):
        gla_chunked(q, k, v, g, chunk_size=0)
    with pytest.raises(ValueError, match='one \\(B, H, T, d_k\\) shape'):
        gla_chunked(q, k[..., :3], v, g)
    with pytest.raises(ValueError, match='v must be'):
        gla_recurrent(q, k, v[:, :, :5], g)
    with pytest.raises(ValueError, match='Unknown GLA backend'):
        bidirectional_gla(q, k, v, g, g, backend='cuda')
