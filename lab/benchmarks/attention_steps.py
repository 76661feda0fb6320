"""One forward + backward of an attention module alone, as the attention
benchmarks time it."""

import math

import torch
from mmpretrain.registry import MODELS

from mmlvit.models.attentions import registered_operators

from .options import autocast


def token_grid(name, num_tokens):
    """(hw_shape, N) operator ``name`` sees for ``num_tokens`` = side^2 + 1
    tokens: the class token left out where it takes patch tokens only."""
    side = math.isqrt(num_tokens - 1)
    with_cls = not registered_operators()[name].patch_tokens_only
    return (side, side), side * side + int(with_cls)


def attention_step(
    name, num_tokens, embed_dims, num_heads, device, dtype, batch=1,
    options=None,
):  # fmt: skip
    """A closure running one forward + backward of operator ``name`` (built
    with ``options`` besides its sizes, seeded) on a (batch, N, C) input
    under ``dtype`` autocast, and the module.

    The closure returns the output (detached) and the input's gradient,
    and leaves no gradient behind.
    """
    torch.manual_seed(0)
    hw_shape, n = token_grid(name, num_tokens)
    cfg = dict(
        type=name, embed_dims=embed_dims, num_heads=num_heads, **options or {}
    )
    with torch.device(device):
        module = MODELS.build(cfg).to(device)
        x = torch.randn(batch, n, embed_dims, requires_grad=True)
        grad = torch.randn(batch, n, embed_dims)

    def step():
        with autocast(device, dtype):
            out = module(x, hw_shape)
        out.backward(grad.to(out.dtype))
        result = out.detach(), x.grad
        module.zero_grad(set_to_none=True)
        x.grad = None
        return result

    return step, module
