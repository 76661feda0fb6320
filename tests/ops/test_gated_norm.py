"""The gated RMSNorm after GLA's scan: the backend choice; its fused
kernels on CPU under Triton's interpreter (gated_norm_interpreter.py, in a
subprocess) against the float64 reference, output and every gradient, and
GLA's module running them; on CUDA at real sizes."""

import interpreter_run
import pytest
import torch

from mmlvit.ops.gla import gated_rms_norm


def test_auto_is_the_reference_on_cpu(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    torch.manual_seed(0)
    o, gate = torch.randn(2, 3, 5, 8), torch.randn(2, 5, 24)
    weight = torch.rand(8)
    rms = o.pow(2).mean(-1, keepdim=True).add(1e-5).rsqrt()
    expected = (o * rms * weight).transpose(1, 2).reshape(2, 5, 24)
    expected = expected * gate * torch.sigmoid(gate)
    torch.testing.assert_close(gated_rms_norm(o, gate, weight, 1e-5), expected)
    half = gated_rms_norm(o, gate.bfloat16(), weight, 1e-5)
    assert half.dtype == torch.bfloat16
    with pytest.raises(RuntimeError, match="backend='triton'.*need CUDA"):
        gated_rms_norm(o, gate, weight, 1e-5, backend='triton')
    with pytest.raises(ValueError, match="backend 'fast'"):
        gated_rms_norm(o, gate, weight, 1e-5, backend='fast')


interpreter_report = interpreter_run.report_fixture(
    'gated_norm_interpreter.py', timeout=600
)

# fp32 sums of the inputs as loaded: one rounding of the output and of
# each gradient to its dtype (the weight's gradient stays fp32).
BOUNDS = {'float32': 1e-6, 'bfloat16': 8e-3, 'float16': 1.5e-3}


def test_kernels_match_float64_reference(interpreter_report):
    cases = interpreter_run.dtype_cases(interpreter_report, BOUNDS)
    assert {c['N'] for c in cases} == {50, 197}
    assert {c['d'] for c in cases} == {16, 24, 64}
    assert {c['layout'] for c in cases} == {'scan', 'heads'}
    for case in cases:
        bound = BOUNDS[case['dtype']]
        assert case['finite'], case
        assert case['dtypes'] == [case['dtype']] * 3 + ['float32'], case
        assert set(case['grads']) == {'o', 'gate', 'weight'}
        interpreter_run.assert_within(case, bound)
        assert case['kept_besides_inputs'] == [], case


def test_gla_module_runs_the_fused_norm(interpreter_report):
    """Forward, its rerun under checkpointing, then the gradient kernel."""
    launches = interpreter_report['module_launches']
    assert launches == ['forward', 'forward', 'backward']


@pytest.mark.cuda
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_cuda_fused_matches_reference(dtype):
    torch.manual_seed(0)
    B, H, N, d = 8, 12, 1025, 64
    o = torch.randn(B, N, H, d, device='cuda').transpose(1, 2).to(dtype)
    gate = torch.randn(B, N, H * d, device='cuda').to(dtype)
    weight = 1 + 0.1 * torch.randn(d, device='cuda')
    inputs = [t.clone().requires_grad_() for t in (o, gate, weight)]
    refs = [t.double().requires_grad_() for t in (o, gate, weight)]
    out = gated_rms_norm(*inputs, 1e-5)
    ref = gated_rms_norm(*refs, 1e-5, backend='torch')
    grad = torch.randn_like(ref)
    out.backward(grad.to(dtype))
    ref.backward(grad)
    bound = 1e-6 if dtype == torch.float32 else 8e-3
    assert (out.double() - ref).norm() < bound * ref.norm()
    for t, r in zip(inputs, refs):
        assert (t.grad.double() - r.grad).norm() < bound * r.grad.norm()
