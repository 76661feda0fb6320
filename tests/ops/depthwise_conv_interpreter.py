"""The fused depthwise convolution (MHLA's value conv) on CPU tensors
under Triton's interpreter, against float64 references.

Run as a script (test_depthwise_conv.py does, in a fresh process:
TRITON_INTERPRET must be set before triton is imported). Prints one JSON
line: per case the relative error ||x - ref|| / ||ref|| of the output and
of the gradients of x, the weight and the bias against ``F.conv2d`` in
float64, the output dtype, whether everything is finite and the shapes of
what backward keeps besides views of the input tokens and the weight;
then MHLAttention on the fused path against its float64 PyTorch path
(output, input and every parameter's gradient).
"""

import json

import interpreted  # noqa: F401  (TRITON_INTERPRET=1)

# isort: split

import torch
import torch.nn.functional as F
from fused_linear_interpreter import (
    DTYPES,
    backward_from_random,
    dtype_name,
    keeping_besides,
    module_against_reference,
    output_figures,
    relative,
)

from mmlvit.models.attentions import MHLAttention
from mmlvit.ops import depthwise_conv
from mmlvit.ops.common import linear_launch as fused_function


def grid_view(tokens, grid):
    """(B, H*W, C) tokens -> a (B, C, H, W) view."""
    B, N, C = tokens.shape
    return tokens.reshape(B, *grid, C).permute(0, 3, 1, 2)


def check(dtype, grid, C=96, ks=5, B=2, bias=True, seed=0):
    """x a (B, C, H, W) view of token-major (B, H*W, C) tokens."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randn(B, grid[0] * grid[1], C, generator=g).to(dtype)
    tokens.requires_grad_()
    weight = (0.2 * torch.randn(C, 1, ks, ks, generator=g)).requires_grad_()
    b = torch.randn(C, generator=g).requires_grad_() if bias else None
    with keeping_besides(tokens, weight) as kept:
        out = depthwise_conv(grid_view(tokens, grid), weight, b, 'triton')
    grad_out = backward_from_random(out, g)

    leaves = [t.detach().double().requires_grad_() for t in (tokens, weight)]
    b_ref = b.detach().double().requires_grad_() if bias else None
    x_ref = grid_view(leaves[0], grid)
    ref = F.conv2d(x_ref, leaves[1], b_ref, padding=ks // 2, groups=C)
    (ref * grad_out).sum().backward()
    grads = dict(x=relative(tokens.grad, leaves[0].grad))
    grads['weight'] = relative(weight.grad, leaves[1].grad)
    if bias:
        grads['bias'] = relative(b.grad, b_ref.grad)
    return dict(
        dtype=dtype_name(dtype),
        grid=grid,
        C=C,
        ks=ks,
        bias=bias,
        **output_figures(out, ref, tokens),
        grads=grads,
        kept_besides_inputs=kept,
    )


def main():
    cases = []
    # 96 channels: a full block of 64 and a masked one of 32; grids the
    # token tiles divide or not.
    for dtype in DTYPES.values():
        for grid in ((7, 9), (14, 14)):
            cases.append(check(dtype, grid))
    cases.append(check(torch.float32, (5, 6), C=24, ks=3, bias=False))
    fused_function.TARGET_PROGRAMS = 2  # 6 tiles of (20, 18) in 2 ranges
    cases.append(check(torch.float32, (20, 18), C=16, B=1))
    fused_function.TARGET_PROGRAMS = 512
    mhla = module_against_reference(MHLAttention, 96, 3, (7, 6))
    print(json.dumps(dict(cases=cases, mhla=mhla)))


if __name__ == '__main__':
    main()
