"""TTT's fused kernels (SwiGLU and conv heads): the backend choice and its
errors; on CPU under Triton's interpreter (ttt_interpreter.py, in a
subprocess) against float64 references, outputs and every gradient; on
CUDA at real sizes."""

import interpreter_run
import pytest
import torch

from mmlvit.models.attentions import TTTAttention
from mmlvit.ops import ttt_dwconv, ttt_swiglu
from mmlvit.ops.ttt import ttt_dwconv_reference, ttt_swiglu_reference


def inputs(B=2, H=2, N=12, d=8, dtype=torch.float32, device='cpu'):
    q, k, v = (
        torch.randn(B, H, N, d, dtype=dtype, device=device) for _ in '123'
    )
    w1, w2 = (
        0.3 * torch.randn(1, H, d, d, dtype=dtype, device=device) for _ in '12'
    )
    return q, k, v, w1, w2


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="backend 'fast'"):
        TTTAttention(embed_dims=16, num_heads=2, backend='fast')
    with pytest.raises(ValueError, match="backend 'cuda'"):
        ttt_swiglu(*inputs(), backend='cuda')


def test_auto_takes_the_reference_on_cpu(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    args = inputs()
    torch.testing.assert_close(
        ttt_swiglu(*args), ttt_swiglu_reference(*args), rtol=0, atol=0
    )
    with pytest.raises(RuntimeError, match="backend='triton'.*need CUDA"):
        ttt_swiglu(*args, backend='triton')
    q, k, v = (torch.randn(2, 8, 5, 6) for _ in '123')
    w3 = torch.randn(8, 1, 3, 3)
    torch.testing.assert_close(
        ttt_dwconv(q, k, v, w3), ttt_dwconv_reference(q, k, v, w3)
    )
    with pytest.raises(RuntimeError, match="backend='triton'.*need CUDA"):
        ttt_dwconv(q, k, v, w3, backend='triton')


# --------------------------------------- the kernels, under the interpreter

interpreter_report = interpreter_run.report_fixture(
    'ttt_interpreter.py', timeout=600
)

# Relative-error bounds: fp32 arithmetic; fp16 outputs and gradients are
# rounded once to their dtype; with bf16 inputs the operands of every
# product (Z, the SiLU terms, the stepped weights, dR) are rounded to bf16
# too, and dk passes through four such products: up to three bf16
# roundings.
BOUNDS = {'float32': 2e-6, 'bfloat16': 3e-2, 'float16': 1.5e-3}


def test_kernels_match_float64_reference(interpreter_report):
    cases = interpreter_run.dtype_cases(interpreter_report, BOUNDS)
    assert {c['N'] for c in cases} >= {50, 100, 196, 300}
    assert {c['d'] for c in cases} >= {16, 24, 64}
    assert any(c['per_batch'] for c in cases)
    for case in cases:
        bound = BOUNDS[case['dtype']]
        assert case['finite'], case
        assert case['out_dtype'] == case['dtype'], case
        assert set(case['grads']) == {'q', 'k', 'v', 'w1', 'w2'}
        interpreter_run.assert_within(case, bound)


def test_qkv_gradient_is_one_buffer(interpreter_report):
    assert all(c['qkv_grad_shared'] for c in interpreter_report['cases'])


def test_backward_keeps_only_its_inputs(interpreter_report):
    """Autograd keeps q, k, v (views of the projection) and the learned
    weights: no fp32 N-sized intermediate and no (B, H, d, d) sum; backward
    recomputes the sums and the stepped weights."""
    for case in interpreter_report['cases']:
        assert case['kept_besides_inputs'] == [], case


def test_fp16_inner_sums_past_fp16_range_stay_exact(interpreter_report):
    (large,) = [c for c in interpreter_report['cases'] if c['N'] == 1000]
    assert large['dtype'] == 'float16'
    assert large['largest_inner_sum'] > 65504  # fp16's largest value
    assert large['finite'] and large['out'] < BOUNDS['float16'], large


# The conv head multiplies and adds in fp32 the inputs as loaded: one
# rounding of the output and of each gradient to its dtype.
CONV_BOUNDS = {'float32': 2e-6, 'bfloat16': 8e-3, 'float16': 1.5e-3}


def test_conv_kernels_match_float64_reference(interpreter_report):
    cases = interpreter_run.dtype_cases(
        interpreter_report, CONV_BOUNDS, 'conv_cases'
    )
    assert {tuple(c['grid']) for c in cases} >= {(7, 9), (14, 14), (20, 18)}
    assert {c['d'] for c in cases} >= {16, 24, 64}
    for case in cases:
        bound = CONV_BOUNDS[case['dtype']]
        assert case['finite'] and case['out_dtype'] == case['dtype'], case
        assert set(case['grads']) == {'q', 'k', 'v', 'w3'}
        interpreter_run.assert_within(case, bound)
        assert case['kept_besides_inputs'] == [], case


def test_module_fused_matches_its_reference(interpreter_report):
    """TTTAttention on the fused path (both heads) against its float64
    PyTorch path: output, input and every parameter's gradient."""
    module = interpreter_report['module']
    assert {'x', 'w1', 'w2', 'w3', 'qkv.weight', 'proj.weight'} <= set(
        module['grads']
    )
    interpreter_run.assert_within(module, BOUNDS['float32'])


def test_clipped_step_matches_float64_reference(interpreter_report):
    """The step's kernels in fp32 against float64, a head width that is
    not a power of two and per-sample W among the cases; a column of R
    that is all zeros (norm 0) gets the gradient -f dW' exactly."""
    steps = interpreter_report['steps']
    assert {(c['d'], c['per_batch']) for c in steps} == {
        (64, False),
        (24, True),
    }
    for case in steps:
        interpreter_run.assert_within(case, BOUNDS['float32'])


# ------------------------------------------------------------- on CUDA


@pytest.mark.cuda
@pytest.mark.parametrize('side', [14, 64])
def test_cuda_module_fused_matches_reference(side):
    torch.manual_seed(0)
    fused = TTTAttention(embed_dims=768, num_heads=12).cuda()
    reference = TTTAttention(embed_dims=768, num_heads=12, backend='torch')
    reference.load_state_dict(fused.state_dict())
    reference.cuda()
    x = torch.randn(4, side * side, 768, device='cuda')
    x_fused = x.clone().requires_grad_()
    with torch.autocast('cuda', dtype=torch.bfloat16):
        out = fused(x_fused, (side, side))
    out.float().square().sum().backward()
    x_ref = x.clone().requires_grad_()
    ref = reference(x_ref, (side, side))
    ref.square().sum().backward()
    rel = (out.float() - ref).norm() / ref.norm()
    grad_rel = (x_fused.grad - x_ref.grad).norm() / x_ref.grad.norm()
    assert rel < 2e-2 and grad_rel < 3e-2, (rel, grad_rel)
    for (name, p), q in zip(fused.named_parameters(), reference.parameters()):
        assert (p.grad - q.grad).norm() < 3e-2 * q.grad.norm(), name
