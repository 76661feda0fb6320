"""TTT's fused kernels (SwiGLU and conv heads) on CPU tensors under
Triton's interpreter, against float64 references.

Run as a script (test_ttt_fused.py does, in a fresh process:
TRITON_INTERPRET must be set before triton is imported). Prints one JSON
line: per SwiGLU case the relative error ||x - ref|| / ||ref|| of the
output and of the gradient of q, k, v, W1 and W2, the output dtype,
whether outputs and gradients are finite, whether dq, dk, dv reached
``split_qkv`` as one buffer, the shapes of what backward keeps besides
views of the qkv tensor and the learned weights, and the largest raw inner
sum |k^T (...)|; the same for the conv head (gradients of q, k, v, W3);
then the TTT module on the fused path against its float64 PyTorch path
(output, input and every parameter's gradient), and the clipped step's
kernels alone.

The reference is the PyTorch path in float64 on the inputs as the kernels
see them (rounded to the case's dtype), with the same upstream gradient.
"""

import json

import interpreted  # noqa: F401  (TRITON_INTERPRET=1)

# isort: split

import torch
from fused_linear_interpreter import (
    SHARED,
    backward_from_random,
    dtype_name,
    head_cases,
    heads,
    keeping_besides,
    module_against_reference,
    output_figures,
    relative,
)

from mmlvit.models.attentions import TTTAttention
from mmlvit.ops.common import linear_launch as fused_function
from mmlvit.ops.common.heads import split_qkv
from mmlvit.ops.ttt import (
    TTT_INNER_SCALE,
    swiglu_inner_grads,
    ttt_dwconv,
    ttt_dwconv_reference,
    ttt_swiglu,
    ttt_swiglu_reference,
)
from mmlvit.ops.ttt.naive import normalised
from mmlvit.ops.ttt.swiglu_function import ClippedStep

DTYPES = {
    'fp32': torch.float32,
    'bf16': torch.bfloat16,
    'fp16': torch.float16,
}


def check(dtype, N, H=2, d=16, B=2, scale=1.0, per_batch=False, seed=0):
    """One case: q, k, v views of one (B, N, 3, H, d) tensor; W1, W2
    (1, H, d, d), or (B, H, d, d) with ``per_batch``."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(B, N, 3, H, d, generator=g) * scale).to(dtype)
    x.requires_grad_()
    shape = (B if per_batch else 1, H, d, d)
    w1, w2 = (
        (0.3 * torch.randn(shape, generator=g)).requires_grad_() for _ in '12'
    )
    with keeping_besides(x, w1, w2) as kept:
        out = ttt_swiglu(*split_qkv(x), w1, w2, backend='triton')
    grad_out = backward_from_random(out, g)

    leaves = [t.detach().double().requires_grad_() for t in (x, w1, w2)]
    ref = ttt_swiglu_reference(*heads(leaves[0]), *leaves[1:])
    (ref * grad_out).sum().backward()
    inner = swiglu_inner_grads(*heads(leaves[0])[1:], *leaves[1:])
    raw_sums = max(g.abs().max().item() for g in inner) * N / TTT_INNER_SCALE
    grads = dict(zip('qkv', heads(x.grad)), w1=w1.grad, w2=w2.grad)
    grads_ref = dict(zip('qkv', heads(leaves[0].grad)))
    grads_ref.update(w1=leaves[1].grad, w2=leaves[2].grad)
    return dict(
        dtype=dtype_name(dtype),
        N=N,
        d=d,
        per_batch=per_batch,
        scale=scale,
        **output_figures(out, ref, x),
        qkv_grad_shared=SHARED.pop(),
        grads={n: relative(grads[n], grads_ref[n]) for n in grads},
        kept_besides_inputs=kept,
        largest_inner_sum=raw_sums,
    )


def check_step(d, per_batch, B=2, H=3, seed=0):
    """The clipped step alone: W' = W - G / (||G|| + 1), G = f R, against
    :func:`normalised` in float64, on raw sums R with one all-zero column
    (norm 0: the step's gradient there is -dW' alone); W (1, H, d, d) or,
    ``per_batch``, (B, H, d, d)."""
    g = torch.Generator().manual_seed(seed)
    r = 50 * torch.randn(B, H, d, d, generator=g)
    r[0, 1, :, 2] = 0
    w = torch.randn(B if per_batch else 1, H, d, d, generator=g)
    factor = -TTT_INNER_SCALE / 197
    leaves = [t.clone().requires_grad_() for t in (w, r)]
    out = ClippedStep.apply(*leaves, factor)
    grad_out = torch.randn(out.shape, generator=g)
    out.backward(grad_out)
    refs = [t.double().requires_grad_() for t in (w, r)]
    ref = refs[0] - normalised(refs[1] * factor, dim=-2)
    ref.backward(grad_out.double())
    return dict(
        d=d,
        per_batch=per_batch,
        out=relative(out, ref),
        grads=dict(
            w=relative(leaves[0].grad, refs[0].grad),
            r=relative(leaves[1].grad, refs[1].grad),
            r_zero_column=relative(
                leaves[1].grad[0, 1, :, 2], refs[1].grad[0, 1, :, 2]
            ),
        ),
    )


def grid_views(x, grid):
    """(B, N, 3, d) -> q, k, v, each (B, d, H, W), views."""
    B, N, _, d = x.shape
    return [x[:, :, i].transpose(1, 2).reshape(B, d, *grid) for i in range(3)]


def check_conv(dtype, grid, d=16, B=2, seed=0):
    """One conv-head case: q, k, v (B, d, H, W) views of one token-major
    (B, H*W, 3, d) tensor, W3 (d, 1, 3, 3)."""
    g = torch.Generator().manual_seed(seed)
    N = grid[0] * grid[1]
    x = torch.randn(B, N, 3, d, generator=g).to(dtype).requires_grad_()
    w3 = (0.3 * torch.randn(d, 1, 3, 3, generator=g)).requires_grad_()
    with keeping_besides(x, w3) as kept:
        out = ttt_dwconv(*grid_views(x, grid), w3, backend='triton')
    grad_out = backward_from_random(out, g)

    x_ref, w3_ref = (t.detach().double().requires_grad_() for t in (x, w3))
    ref = ttt_dwconv_reference(*grid_views(x_ref, grid), w3_ref)
    (ref * grad_out).sum().backward()
    grads = dict(zip('qkv', x.grad.unbind(2)), w3=w3.grad)
    grads_ref = dict(zip('qkv', x_ref.grad.unbind(2)), w3=w3_ref.grad)
    return dict(
        dtype=dtype_name(dtype),
        grid=grid,
        d=d,
        **output_figures(out, ref, x),
        grads={n: relative(grads[n], grads_ref[n]) for n in grads},
        kept_besides_inputs=kept,
    )


def main():
    # Tiles of 32 tokens: 50 tokens, a full and a partial one; 196 (a 14 x
    # 14 grid), seven, split over seven programs per head; then head width
    # 64 (ViT-B), one not a power of two, per-sample weights.
    cases = head_cases(check, (50, 196))
    cases.append(check(torch.float32, 50, per_batch=True))
    # Several tiles per program (the split loop); fp16 inputs of magnitude
    # 10 over 1000 tokens, whose inner sums (~1e6) exceed fp16's range.
    fused_function.TARGET_PROGRAMS = 2
    cases.append(check(torch.float32, 300, B=1, H=1))
    cases.append(check(torch.float16, 1000, B=1, H=1, scale=10.0))
    # One split (as at a large batch): the sums are the partials, no add.
    fused_function.TARGET_PROGRAMS = 1
    cases.append(check(torch.float32, 100))
    # The conv head: a grid the tiles divide or not, rows of 9 and 14.
    conv_cases = []
    fused_function.TARGET_PROGRAMS = 512
    for dtype in DTYPES.values():
        for grid in ((7, 9), (14, 14)):
            conv_cases.append(check_conv(dtype, grid))
    conv_cases.append(check_conv(torch.float32, (14, 14), d=64, B=1))
    conv_cases.append(check_conv(torch.float32, (5, 6), d=24))
    fused_function.TARGET_PROGRAMS = 2  # 6 tiles of (20, 18) in 2 ranges
    conv_cases.append(check_conv(torch.float32, (20, 18), B=1))
    fused_function.TARGET_PROGRAMS = 512
    module = module_against_reference(TTTAttention, 32, 2, (7, 6))
    steps = [check_step(64, False), check_step(24, True)]
    report = dict(
        cases=cases, conv_cases=conv_cases, module=module, steps=steps
    )
    print(json.dumps(report))


if __name__ == '__main__':
    main()
