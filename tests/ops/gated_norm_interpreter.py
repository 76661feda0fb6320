"""The fused gated RMSNorm (GLA's output norm) on CPU tensors under
Triton's interpreter, against its PyTorch reference in float64.

Run as a script (test_gated_norm.py does, in a fresh process:
TRITON_INTERPRET must be set before triton is imported). Prints one JSON
line: per case the relative error ||x - ref|| / ||ref|| of the output and
of the gradients of o, the gate and the weight, the dtypes of the output
and gradients, whether everything is finite and the shapes of what
backward keeps besides views of the inputs.
"""

import json

import interpreted  # noqa: F401  (TRITON_INTERPRET=1)

# isort: split

import torch
from fused_linear_interpreter import (
    dtype_name,
    head_cases,
    keeping_besides,
    relative,
)

from mmlvit.models.attentions import GatedLinearAttention
from mmlvit.ops.gla import gate_kernels as function
from mmlvit.ops.gla import gated_rms_norm

EPS = 1e-5


def check(dtype, N, H=2, d=16, B=2, seed=0, layout='scan'):
    """One case. ``layout``: 'scan' gives o as a (B, H, N, d) view of a
    token-major (B, N, H, d) tensor (as GLA's scan writes it), 'heads' a
    contiguous (B, H, N, d) one."""
    g = torch.Generator().manual_seed(seed)
    if layout == 'scan':
        o = torch.randn(B, N, H, d, generator=g).transpose(1, 2)
    else:
        o = torch.randn(B, H, N, d, generator=g)
    o = (o * 3).to(dtype).requires_grad_()
    gate = (torch.randn(B, N, H * d, generator=g) * 2).to(dtype)
    gate.requires_grad_()
    weight = (1 + 0.5 * torch.randn(d, generator=g)).requires_grad_()
    grad = torch.randn(B, N, H * d, generator=g).to(dtype)
    with keeping_besides(o, gate, weight) as kept:
        out = gated_rms_norm(o, gate, weight, EPS, backend='triton')
    out.backward(grad)
    refs = [t.detach().double().requires_grad_() for t in (o, gate, weight)]
    ref = gated_rms_norm(*refs, EPS, backend='torch')
    ref.backward(grad.double())
    names = ('o', 'gate', 'weight')
    tensors = (out, o.grad, gate.grad, weight.grad)
    return dict(
        dtype=dtype_name(dtype),
        N=N,
        d=d,
        layout=layout,
        out=relative(out, ref),
        grads={
            n: relative(t.grad, r.grad)
            for n, t, r in zip(names, (o, gate, weight), refs)
        },
        dtypes=[dtype_name(t.dtype) for t in tensors],
        finite=all(bool(torch.isfinite(t).all()) for t in tensors),
        kept_besides_inputs=kept,
    )


def module_launches():
    """The kernels a GatedLinearAttention on the triton backend runs for
    its output norm in one bf16-autocast forward + backward (checkpointing
    reruns the forward in backward)."""
    launches = []
    for kind in ('forward', 'backward'):
        original = getattr(function.RowLaunch, kind)

        def record(self, *args, _original=original, _kind=kind):
            launches.append(_kind)
            return _original(self, *args)

        setattr(function.RowLaunch, kind, record)
    torch.manual_seed(0)
    m = GatedLinearAttention(32, 2, backend='triton')
    x = torch.randn(2, 17, 32, requires_grad=True)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = m(x, (4, 4))
    out.float().sum().backward()
    return launches


def main():
    torch.set_num_threads(1)
    # 50 tokens: one partial tile; 197: a 14 x 14 grid + class token; then
    # ViT-B's head width, one that is not a power of two, contiguous heads.
    cases = head_cases(check, (50, 197))
    cases.append(check(torch.bfloat16, 50, layout='heads'))
    print(json.dumps(dict(cases=cases, module_launches=module_launches())))


if __name__ == '__main__':
    main()
