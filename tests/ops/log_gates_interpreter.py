"""GLA's fused log-gates on CPU tensors under Triton's interpreter, against
the PyTorch reference in float64.

Run as a script (test_log_gates.py does, in a fresh process:
TRITON_INTERPRET must be set before triton is imported). Prints one JSON
line: per case the relative error ||x - ref|| / ||ref|| of both
directions' gates and of the gradients of the four inputs (the tokens, the
down-projection's weight, the up-projection's weight and bias), their
dtypes, whether everything is finite, the largest gate and what backward
keeps besides the inputs, for the gates or their cumulative sums within
chunks (``chunk``: of 64 tokens by the kernels, of others by
``within_chunks`` after them); then the launches GatedLinearAttention on
the triton backend makes.
"""

import json

import interpreted  # noqa: F401  (TRITON_INTERPRET=1)

# isort: split

import torch
from fused_linear_interpreter import (
    DTYPES,
    keeping_besides,
    relative,
)

from mmlvit.models.attentions import GatedLinearAttention
from mmlvit.ops.gla import gates as gates_module
from mmlvit.ops.gla import log_gates

HALVES = ('bf16', 'fp16')


def check(
    N, H=2, d=16, R=16, B=2, spread=8.0, temperature=16.0, dtype='fp32',
    seed=0, chunk=None,
):  # fmt: skip
    """One case: tokens x in ``dtype``, weights in fp32 scaled so that the
    logits have a standard deviation of about ``spread`` (log-sigmoids from
    about -4 spread to its exponentially small tail)."""
    g = torch.Generator().manual_seed(seed)
    C = H * d
    x = torch.randn(B, N, C, generator=g).to(DTYPES[dtype])
    inputs = (
        x,
        torch.randn(R, C, generator=g) / C**0.5,
        torch.randn(2 * C, R, generator=g) * spread / R**0.5,
        torch.randn(2 * C, generator=g),
    )
    for t in inputs:
        t.requires_grad_()
    grads = [torch.randn(B, H, N, d, generator=g) for _ in range(2)]
    with keeping_besides(*inputs) as kept:
        gates = log_gates(
            *inputs, H, temperature, backend='triton', chunk=chunk
        )
    torch.autograd.backward(gates, grads)
    refs_in = [t.detach().double().requires_grad_() for t in inputs]
    refs = log_gates(*refs_in, H, temperature, backend='torch', chunk=chunk)
    torch.autograd.backward(refs, [t.double() for t in grads])
    names = ('x', 'down_weight', 'up_weight', 'up_bias')
    return dict(
        N=N,
        d=d,
        R=R,
        dtype=dtype,
        chunk=chunk,
        dtypes=[str(t.dtype) for t in (*gates, *(t.grad for t in inputs))],
        gates=[relative(x, r) for x, r in zip(gates, refs)],
        grads={
            name: relative(t.grad, r.grad)
            for name, t, r in zip(names, inputs, refs_in)
        },
        finite=all(
            bool(torch.isfinite(t).all())
            for t in (*gates, *(t.grad for t in inputs))
        ),
        largest=max(float(t.detach().max()) for t in gates),
        kept_besides_inputs=kept,
    )


def module_launches():
    """The log-gate Functions a GatedLinearAttention on the triton backend
    runs in one forward + backward: the scan computes the gates in its
    forward and again in its backward."""
    calls = []
    original = gates_module.LogGates.forward

    def record(ctx, *args):
        calls.append('gates')
        return original(ctx, *args)

    gates_module.LogGates.forward = staticmethod(record)
    torch.manual_seed(0)
    m = GatedLinearAttention(32, 2, backend='triton')
    x = torch.randn(2, 17, 32, requires_grad=True)
    m(x, (4, 4)).sum().backward()
    return calls


def main():
    torch.set_num_threads(1)
    # 50 tokens: one partial tile; 197: a 14 x 14 grid + class token.
    cases = [check(N) for N in (50, 197)]
    cases.append(check(197, d=64, H=1, B=1))  # ViT-B's head width
    cases.append(check(50, d=24, R=5, spread=40.0, temperature=1.0))
    # The tokens as autocast gives them (bf16, fp16), 80 channels a row.
    cases += [check(197, H=5, dtype=name, seed=1) for name in HALVES]
    # Cumulative within chunks: by the kernels (64), after them (32).
    cases += [check(N, chunk=64, seed=2) for N in (50, 197)]
    cases.append(check(197, d=64, H=1, B=1, chunk=64, dtype='bf16'))
    cases.append(check(150, chunk=32, seed=3))
    print(json.dumps(dict(cases=cases, module_launches=module_launches())))


if __name__ == '__main__':
    main()
