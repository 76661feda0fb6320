"""torch.compile(fullgraph=True) of LinearVisionTransformer, every operator.

One graph for the whole backbone, no graph break: drop-path rates reach
mmcv's ``drop_path`` as Python floats, and GLA's PyTorch path gives way to
its plain-op form while compiling. The compiled model computes the eager
model's outputs and gradients; float64 keeps rounding out of the
comparison (fp32's own rounding on the class token's gradient is about 1 %
of its size, in eager mode alone).
"""

import pytest
import torch
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from tiny_vit import backbone_cfg

from mmlvit.models.attentions import registered_operators

TINY = dict(embed_dims=64, num_layers=2, num_heads=2, feedforward_channels=128)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def tiny_backbone(operator, arch=TINY, **options):
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    # Layer 1 drops at 0.2: the branch compiles.
    cfg = backbone_cfg(
        operator, arch, in_channels=3, drop_path_rate=0.2, **options
    )
    return MODELS.build(cfg).double()


def outputs_and_grads(run, model, images):
    """``run(images)`` (the model or its compiled form), then the
    gradients of a loss on it by parameter name."""
    model.zero_grad()
    torch.manual_seed(1)  # the same drop-path draws in both runs
    (out,) = run(images)
    out.square().sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return out.detach(), grads


def assert_compiled_matches_eager(model):
    images = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    compiled = torch.compile(model, fullgraph=True)
    # Inductor draws drop-path masks with eager's generator.
    with torch._inductor.config.patch(fallback_random=True):
        out, grads = outputs_and_grads(compiled, model, images)
    eager_out, eager_grads = outputs_and_grads(model, model, images)
    torch.testing.assert_close(out, eager_out, rtol=1e-9, atol=1e-10)
    assert grads.keys() == eager_grads.keys()
    scale = max(g.abs().max() for g in eager_grads.values())
    for name, grad in eager_grads.items():
        torch.testing.assert_close(
            grads[name], grad, rtol=1e-7, atol=1e-10 * scale, msg=name
        )


@pytest.mark.parametrize('operator', sorted(registered_operators()))
def test_fullgraph_compile_matches_eager(operator):
    assert_compiled_matches_eager(tiny_backbone(operator).train())


def test_fullgraph_compile_with_rotary_positions():
    """DINOv3's rotary positions on q and k (GLA; softmax and InLine
    share the rotation) and on the feature-mapped q and k (ReLU; ELU
    shares it)."""
    names = ['GatedLinearAttention', 'ReLULinearAttention']
    model = tiny_backbone(
        names[0],
        arch=dict(TINY, num_layers=len(names)),
        attn_cfg=[dict(type=name) for name in names],
        rope_cfg=dict(type='dinov3'),
    )
    assert_compiled_matches_eager(model.train())
