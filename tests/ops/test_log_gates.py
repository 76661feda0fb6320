"""GLA's log-gates from the low-rank gate projection: the backend choice;
the fused kernels on CPU under Triton's interpreter
(log_gates_interpreter.py, in a subprocess) against the float64
reference, gates and the gradients of the features, weight and bias, and
GLA's module running them; on CUDA at real sizes."""

import interpreter_run
import pytest
import torch
import torch.nn.functional as F

from mmlvit.ops.gla import log_gates


def test_auto_is_the_reference_on_cpu(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    features, weight, bias = (
        torch.randn(2, 5, 4),
        torch.randn(48, 4),
        torch.randn(48),
    )
    g_fwd, g_bwd = log_gates(features, weight, bias, 3, 16.0)
    logits = features @ weight.T + bias
    expected = F.logsigmoid(logits).div(16).view(2, 5, 2, 3, 8)
    torch.testing.assert_close(g_fwd, expected[:, :, 0].transpose(1, 2))
    torch.testing.assert_close(g_bwd, expected[:, :, 1].transpose(1, 2))
    with pytest.raises(RuntimeError, match="backend='triton'.*need CUDA"):
        log_gates(features, weight, bias, 3, 16.0, backend='triton')


interpreter_report = interpreter_run.report_fixture(
    'log_gates_interpreter.py', timeout=600
)


def test_kernels_match_float64_reference(interpreter_report):
    cases = interpreter_report['cases']
    assert {c['N'] for c in cases} == {50, 197}
    assert {(c['d'], c['R']) for c in cases} == {(16, 16), (24, 5), (64, 16)}
    for case in cases:
        assert case['finite'] and case['largest'] <= 0, case
        assert max(case['gates']) < 1e-6, case
        assert max(case['grads'].values()) < 1e-6, case
        assert case['kept_besides_inputs'] == [], case


def test_gla_module_runs_the_fused_gates(interpreter_report):
    """In the scan's forward and again in its backward."""
    assert interpreter_report['module_launches'] == ['gates', 'gates']


@pytest.mark.cuda
def test_cuda_fused_matches_reference():
    torch.manual_seed(0)
    inputs = (
        torch.randn(8, 1025, 16, device='cuda'),
        torch.randn(2 * 768, 16, device='cuda') * 2,
        torch.randn(2 * 768, device='cuda'),
    )
    fused_in = [t.clone().requires_grad_() for t in inputs]
    refs_in = [t.double().requires_grad_() for t in inputs]
    gates = log_gates(*fused_in, 12, 16.0)
    refs = log_gates(*refs_in, 12, 16.0, backend='torch')
    grads = [torch.randn_like(r) for r in refs]
    torch.autograd.backward(gates, [g.float() for g in grads])
    torch.autograd.backward(refs, grads)
    for x, r in zip(gates, refs):
        assert (x.double() - r).norm() < 1e-6 * r.norm()
    for x, r in zip(fused_in, refs_in):
        assert (x.grad.double() - r.grad).norm() < 1e-6 * r.grad.norm()
