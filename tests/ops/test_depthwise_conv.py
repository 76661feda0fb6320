"""The depthwise convolution on token grids (MHLA's value conv): the
backend choice; its fused kernels on CPU under Triton's interpreter
(depthwise_conv_interpreter.py, in a subprocess) against F.conv2d in
float64, outputs and every gradient, and MHLA on them; on CUDA at real
sizes."""

import interpreter_run
import pytest
import torch
import torch.nn.functional as F

from mmlvit.ops import depthwise_conv


def test_auto_is_pytorchs_conv_on_cpu(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    x = torch.randn(2, 6, 5, 7)
    weight, bias = torch.randn(6, 1, 5, 5), torch.randn(6)
    expected = F.conv2d(x, weight, bias, padding=2, groups=6)
    torch.testing.assert_close(depthwise_conv(x, weight, bias), expected)
    with pytest.raises(RuntimeError, match="backend='triton'.*need CUDA"):
        depthwise_conv(x, weight, bias, backend='triton')
    with pytest.raises(ValueError, match="backend 'fast'"):
        depthwise_conv(x, weight, bias, backend='fast')


interpreter_report = interpreter_run.report_fixture(
    'depthwise_conv_interpreter.py', timeout=600
)

# fp32 multiply-adds of the inputs as loaded: one rounding of the output
# and of each gradient to its dtype.
BOUNDS = {'float32': 2e-6, 'bfloat16': 8e-3, 'float16': 1.5e-3}


def test_kernels_match_float64_conv2d(interpreter_report):
    cases = interpreter_run.dtype_cases(interpreter_report, BOUNDS)
    assert {c['ks'] for c in cases} == {3, 5}
    assert {c['C'] for c in cases} >= {16, 24, 96}  # 96: two channel blocks
    assert {c['bias'] for c in cases} == {True, False}
    for case in cases:
        bound = BOUNDS[case['dtype']]
        assert case['finite'] and case['out_dtype'] == case['dtype'], case
        interpreter_run.assert_within(case, bound)
        assert case['kept_besides_inputs'] == [], case


def test_mhla_fused_matches_its_reference(interpreter_report):
    """MHLAttention with its attention and value conv fused against its
    float64 PyTorch path: output, input and every parameter's gradient."""
    mhla = interpreter_report['mhla']
    assert mhla['out'] < BOUNDS['float32'], mhla
    assert {'x', 'mixing', 'lepe.weight', 'lepe.bias'} <= set(mhla['grads'])
    for name, error in mhla['grads'].items():
        assert error < 5e-6, (name, mhla)


@pytest.mark.cuda
@pytest.mark.parametrize('side', [14, 64])
def test_cuda_fused_matches_conv2d(side, monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, 'allow_tf32', False)
    torch.manual_seed(0)
    tokens = torch.randn(4, side * side, 768, device='cuda')
    weight = 0.1 * torch.randn(768, 1, 5, 5, device='cuda')
    bias = torch.randn(768, device='cuda')
    grid = tokens.view(4, side, side, 768).permute(0, 3, 1, 2)
    params = [t.clone().requires_grad_() for t in (grid, weight, bias)]
    out = depthwise_conv(*params)
    ref_params = [t.clone().requires_grad_() for t in (grid, weight, bias)]
    ref = F.conv2d(*ref_params, padding=2, groups=768)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    grad = torch.randn_like(ref)
    out.backward(grad)
    ref.backward(grad)
    for p, r in zip(params, ref_params):
        assert (p.grad - r.grad).norm() < 1e-4 * r.grad.norm()
