"""Inputs and gradients shared by the GLA tests (test_gla.py,
test_gla_fla.py and the interpreter run fla_interpreter.py)."""

import torch
import torch.nn.functional as F


def inputs(B=2, H=3, T=37, d=4, dv=None, dtype=torch.float64, seed=0, gate=1):
    """q, k, v (B, H, T, d|dv) and ``gate`` log-gate tensors (<= 0)."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)

    q, k = randn(B, H, T, d), randn(B, H, T, d)
    v = randn(B, H, T, dv or d)
    # log(alpha) spread from about -5 to -0.002: strong and weak decays.
    gates = [F.logsigmoid(3 * randn(B, H, T, d)) for _ in range(gate)]
    return q, k, v, *gates


def grads(fn, tensors, seed=1):
    """Gradients of <fn(*tensors), w> for a fixed random w."""
    tensors = [t.detach().requires_grad_() for t in tensors]
    out = fn(*tensors)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))
    return torch.autograd.grad(out, tensors, w.to(out.dtype))
