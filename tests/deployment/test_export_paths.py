"""The export paths compute the default paths' functions: the traceable
GLA scan, TTT's unfolded per-sample conv and MHLA's clamp as a graph op
(taken while a model is traced for export, forced here)."""

import pytest
import torch
import torch.nn.functional as F

import mmlvit.models.attentions.mhla as mhla_module
import mmlvit.ops.gla as gla_dispatch
from mmlvit.models.attentions import MHLAttention
from mmlvit.ops.gla import bidirectional_gla, gla_recurrent
from mmlvit.ops.gla.naive import (
    bidirectional_gla_traceable,
    causal_gla_traceable,
)


def gla_inputs(T, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k, v, a, b = (
        torch.randn(2, 3, T, 4, generator=gen, dtype=dtype) for _ in range(5)
    )
    return q, k, v, F.logsigmoid(3 * a), F.logsigmoid(3 * b)


@pytest.mark.parametrize('T', [1, 15, 16, 37, 70])
def test_traceable_gla_is_the_chunked_scan(T):
    """fp64, one chunk and several, the last one part-filled."""
    q, k, v, g_fwd, g_bwd = gla_inputs(T)
    expected = bidirectional_gla(q, k, v, g_fwd, g_bwd, backend='torch')
    got = bidirectional_gla_traceable(q, k, v, g_fwd, g_bwd, 4**-0.5)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    causal = causal_gla_traceable(q, k, v, g_fwd, 0.5)
    torch.testing.assert_close(
        causal, gla_recurrent(q, k, v, g_fwd, 0.5), rtol=1e-12, atol=1e-12
    )


def test_traceable_gla_strong_decays_fp32():
    """Decays down to exp(-400) per token: finite and as close to the fp64
    result as the default fp32 path."""
    q, k, v, g_fwd, g_bwd = gla_inputs(197)
    g_fwd, g_bwd = torch.full_like(g_fwd, -400.0), 50 * g_bwd
    exact = bidirectional_gla(q, k, v, g_fwd, g_bwd, backend='torch')
    args = [t.float() for t in (q, k, v, g_fwd, g_bwd)]
    got = bidirectional_gla_traceable(*args, 0.5).double()
    default = bidirectional_gla(*args, backend='torch').double()
    assert torch.isfinite(got).all()
    error = (got - exact).abs().max()
    assert error <= max(2 * (default - exact).abs().max(), 1e-5)


def test_gla_takes_traceable_path_when_exporting(monkeypatch):
    """Any backend, 'fla' on the CPU included, gives way while exporting."""
    q, k, v, g_fwd, g_bwd = gla_inputs(20, torch.float32)
    expected = bidirectional_gla(q, k, v, g_fwd, g_bwd, backend='torch')
    monkeypatch.setattr(gla_dispatch, 'exporting', lambda: True)
    got = bidirectional_gla(q, k, v, g_fwd, g_bwd, backend='fla')
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_mhla_export_clamps_mixing_as_an_op(monkeypatch):
    """The export path's W.clamp(0, 1) is the W the default path uses
    after its in-place clamp, and leaves the parameter as it is."""
    attention = MHLAttention(embed_dims=8, num_heads=2)
    with torch.no_grad():
        attention.mixing.mul_(3).sub_(0.5)  # entries out of [0, 1]
    before = attention.mixing.detach().clone()
    monkeypatch.setattr(mhla_module, 'exporting', lambda: True)
    exported = attention.mixing_weights()
    torch.testing.assert_close(attention.mixing.detach(), before)
    monkeypatch.setattr(mhla_module, 'exporting', lambda: False)
    torch.testing.assert_close(exported, attention.mixing_weights())
    assert (before < 0).any() and (before > 1).any()
