"""GLA's log-gates from their logits: the backend choice; the fused
kernels on CPU under Triton's interpreter (log_gates_interpreter.py, in a
subprocess) against the float64 reference, gates and the logits'
gradient, and GLA's module running them; on CUDA at real sizes."""

import interpreter_run
import pytest
import torch
import torch.nn.functional as F

from mmlvit.ops.gla import log_gates


def test_auto_is_the_reference_on_cpu(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    logits = torch.randn(2, 5, 2 * 3 * 8)
    g_fwd, g_bwd = log_gates(logits, 3, 16.0)
    expected = F.logsigmoid(logits).div(16).view(2, 5, 2, 3, 8)
    torch.testing.assert_close(g_fwd, expected[:, :, 0].transpose(1, 2))
    torch.testing.assert_close(g_bwd, expected[:, :, 1].transpose(1, 2))
    with pytest.raises(RuntimeError, match="backend='triton'.*need CUDA"):
        log_gates(logits, 3, 16.0, backend='triton')


interpreter_report = interpreter_run.report_fixture(
    'log_gates_interpreter.py', timeout=600
)


def test_kernels_match_float64_reference(interpreter_report):
    cases = interpreter_report['cases']
    assert {c['N'] for c in cases} == {50, 197}
    assert {c['d'] for c in cases} == {16, 24, 64}
    for case in cases:
        assert case['finite'] and case['largest'] <= 0, case
        assert max(case['gates']) < 1e-6, case
        assert case['grad'] < 1e-6, case
        assert case['kept_besides_inputs'] == [], case


def test_gla_module_runs_the_fused_gates(interpreter_report):
    """In the scan's forward and again in its backward."""
    assert interpreter_report['module_launches'] == ['gates', 'gates']


@pytest.mark.cuda
def test_cuda_fused_matches_reference():
    torch.manual_seed(0)
    logits = 8 * torch.randn(8, 1025, 2 * 768, device='cuda')
    fused_logits = logits.clone().requires_grad_()
    ref_logits = logits.double().requires_grad_()
    gates = log_gates(fused_logits, 12, 16.0)
    refs = log_gates(ref_logits, 12, 16.0, backend='torch')
    grads = [torch.randn_like(r) for r in refs]
    torch.autograd.backward(gates, [g.float() for g in grads])
    torch.autograd.backward(refs, grads)
    for x, r in zip(gates, refs):
        assert (x.double() - r).norm() < 1e-6 * r.norm()
    error = (fused_logits.grad.double() - ref_logits.grad).norm()
    assert error < 1e-6 * ref_logits.grad.norm()
