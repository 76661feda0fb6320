"""The fused kernels' entry points (``triton_runtime.fused_entry``): they
launch on their tensors' device, and under ``torch.compile`` they run
outside Dynamo's graphs while the rest compiles, a training step equal to
the eager one; their backward is first-order only, and says so (on CPU
tensors under Triton's interpreter: fused_model_interpreter.py, in a
subprocess)."""

import contextlib

import interpreter_run
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from mmlvit.ops.common import triton_runtime

# The functions each operator's fused path enters, which Dynamo calls
# eagerly.
ENTRY_POINTS = {
    'ELULinearAttention': ['fused_linear_attention'],
    'ReLULinearAttention': ['fused_linear_attention'],
    'InLineAttention': ['fused_linear_attention'],
    'MHLAttention': ['fused_depthwise_conv', 'fused_mhla_attention'],
    'TTTAttention': ['fused_ttt_dwconv', 'fused_ttt_swiglu'],
    'GatedLinearAttention': [
        'bidirectional_triton_gated',
        'fused_gated_rms_norm',
    ],
}

reports = interpreter_run.report_fixture(
    'fused_model_interpreter.py', timeout=600
)


def test_entry_points_run_on_their_tensors_device(monkeypatch):
    """Triton launches on the current CUDA device: an entry point makes
    its first tensor's device current for the call (a fake tensor on
    cuda:1 here), and leaves CPU tensors (the interpreter's) alone."""
    seen = []

    @contextlib.contextmanager
    def device(d):
        seen.append(('current', d))
        yield
        seen.append(('restored', d))

    monkeypatch.setattr(torch.cuda, 'device', device)

    @triton_runtime.fused_entry
    def entry(scale, x, y):
        seen.append(('launch', x.device))
        return scale

    with FakeTensorMode():
        x = torch.empty(2, device='cuda:1')
    cuda1 = torch.device('cuda', 1)
    assert entry(0.5, x, x) == 0.5
    assert seen == [('current', cuda1), ('launch', cuda1), ('restored', cuda1)]
    seen.clear()
    assert entry(0.5, torch.zeros(2), x) == 0.5
    assert seen == [('launch', torch.device('cpu'))]


def test_every_linear_operator_is_checked(reports):
    assert set(reports) == set(ENTRY_POINTS)


@pytest.mark.parametrize('operator', sorted(ENTRY_POINTS))
def test_compiled_step_equals_eager_with_kernels_outside_graphs(
    reports, operator
):
    """Output and every parameter gradient of the compiled model within
    1e-5 of the largest magnitude of the eager ones (fp32; inductor's
    products and sums round in another order); Dynamo's only graph breaks
    are the fused entry points."""
    report = reports[operator]['compiled']
    assert report['eager_calls'] == ENTRY_POINTS[operator], report
    assert report['other_breaks'] == [], report
    interpreter_run.assert_close(report, rtol=1e-5)


@pytest.mark.parametrize('operator', sorted(ENTRY_POINTS))
def test_second_derivatives_through_the_kernels_raise(reports, operator):
    """The kernels' backward is first-order: differentiating a gradient
    taken through them with ``create_graph=True`` raises (it gave zero
    second derivatives, silently, before its backward was marked
    once-differentiable)."""
    error = reports[operator]['second_backward']
    assert error is not None and 'once_differentiable' in error


@pytest.mark.cuda
def test_compiled_gla_step_equals_eager_on_cuda():
    """The same on a GPU with ``backend='auto'`` (the fused kernels):
    GLA, whose kernels' Function recomputes its gates in backward, fp32,
    within 1e-4 of the eager step's largest magnitudes. Compiled by
    Dynamo and AOTAutograd without inductor's code generation
    (``aot_eager``), which would compile Triton kernels of its own within
    the GPU report's time for the tests."""
    import torch
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    import mmlvit  # noqa: F401

    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    model = MODELS.build(
        dict(
            type='LinearVisionTransformer',
            arch=dict(
                embed_dims=64, num_layers=1, num_heads=2,
                feedforward_channels=128,
            ),
            img_size=64,
            patch_size=8,
            attn_cfg=dict(type='GatedLinearAttention'),
        )
    ).cuda()  # fmt: skip
    images = torch.randn(2, 3, 64, 64, device='cuda')
    w = torch.randn(2, 64, device='cuda')

    def step(run):
        model.zero_grad()
        (out,) = run(images)
        (out * w).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        return out.detach(), grads

    ref, want = step(model)
    torch._dynamo.reset()
    out, got = step(torch.compile(model, backend='aot_eager'))
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-4 * ref.abs().max())
    for name, grad in want.items():
        atol = 1e-4 * grad.abs().max()
        torch.testing.assert_close(got[name], grad, rtol=0, atol=atol)
