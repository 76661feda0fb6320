"""A LinearVisionTransformer on the fused kernels under ``torch.compile``
and under a second backward, on CPU tensors under Triton's interpreter.

Run as a script (test_fused_entry.py does, in a fresh process:
TRITON_INTERPRET must be set before triton is imported). For every linear
operator, a tiny backbone (C = 32, 2 heads, one layer, 32 px, patch 8: 17
tokens with the class token) with ``backend='triton'``:

- ``compiled``: one training step eagerly and one through
  ``torch.compile(model)`` (inductor): the largest difference of the
  output and of every parameter gradient, their largest magnitudes, the
  functions Dynamo broke its graphs at to call them eagerly (the fused
  kernels' entry points) and the reasons of any other graph break;
- ``second_backward``: the error that differentiating the input gradient
  (taken with ``create_graph=True``) raises, or None.

Prints one JSON line.
"""

import json
import re

import interpreted  # noqa: F401  (TRITON_INTERPRET=1)

# isort: split

import torch
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS

from mmlvit.models.attentions import registered_operators

# Dynamo's graph-break reason at a torch.compiler.disable()d function.
DISABLED = re.compile(r'Skip calling function `<function (\w+)')
TINY = dict(embed_dims=32, num_layers=1, num_heads=2, feedforward_channels=64)


def step(run, model, images):
    """``run(images)``'s output and the parameter gradients of <output,
    w> for a fixed random w (the square of a normalised output would sum
    to a constant, with gradients of rounding noise)."""
    model.zero_grad()
    (out,) = run(images)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    (out * w).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return out.detach(), grads


def tiny(operator):
    """The tiny backbone of ``operator`` on the fused kernels, training."""
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    return MODELS.build(
        dict(
            type='LinearVisionTransformer',
            arch=TINY,
            img_size=32,
            patch_size=8,
            attn_cfg=dict(type=operator, backend='triton'),
        )
    ).train()


def check(operator):
    """The ``compiled`` report of ``operator`` (see above)."""
    model = tiny(operator)
    images = torch.randn(2, 3, 32, 32)
    ref, want = step(model, model, images)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    out, got = step(torch.compile(model), model, images)
    breaks = [
        (DISABLED.search(reason), reason)
        for reason in torch._dynamo.utils.counters['graph_break']
    ]
    return dict(
        out=(out - ref).abs().max().item(),
        out_scale=ref.abs().max().item(),
        grads={n: (got[n] - g).abs().max().item() for n, g in want.items()},
        grad_scales={n: g.abs().max().item() for n, g in want.items()},
        eager_calls=sorted(m[1] for m, _ in breaks if m),
        other_breaks=[reason for m, reason in breaks if not m],
    )


def second_backward(operator):
    """The RuntimeError of a backward through an input gradient taken
    with ``create_graph=True`` (the kernels' backward is first-order
    only), or None where it ran."""
    model = tiny(operator)
    images = torch.randn(2, 3, 32, 32, requires_grad=True)
    (out,) = model(images)
    (grad,) = torch.autograd.grad(out.sum(), images, create_graph=True)
    try:
        grad.square().sum().backward()
    except RuntimeError as e:
        return str(e)
    return None


def main():
    torch.set_num_threads(1)
    operators = sorted(set(registered_operators()) - {'SoftmaxAttention'})
    report = {
        op: dict(compiled=check(op), second_backward=second_backward(op))
        for op in operators
    }
    print(json.dumps(report))


if __name__ == '__main__':
    main()
