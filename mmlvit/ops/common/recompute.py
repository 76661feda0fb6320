"""Recompute an operator's intermediates in backward instead of keeping
them.

Operators whose forward is a chain of cheap token-wise steps in fp32 (TTT's
inner step: N x d products, gates and SiLUs) would keep every N-sized fp32
intermediate for backward, several times the memory of its inputs.
:func:`recomputed` keeps only the inputs and reruns the chain in backward
(activation checkpointing of one op): the extra cost is one forward of the
op, small beside the projections around it.

An autograd Function whose inputs another function computes from tensors
that are kept anyway or are small (GLA's gates from the tokens and two
low-rank weights, the fused linear attentions' states from k and v) can
take that function and its tensors instead, save those and recompute in
backward: :func:`rerun_with_grad` and :func:`leaf_grads` are its two
steps. :class:`OutputsOfStates` is that Function for kernels whose output
reads the queries and small per-head states computed from the keys and
values (the fused linear attentions, TTT's stepped inner weights).
"""

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

from .tracing import exporting


def recomputed(fn: Callable, *args: Tensor) -> Tensor:
    """``fn(*args)``, its intermediates recomputed in backward when a
    gradient will be taken (plain call otherwise and while exporting).

    Args:
        fn (Callable): A deterministic function of tensors (no randomness).
        *args: Its arguments.

    Returns:
        What ``fn`` returns.
    """
    if not torch.is_grad_enabled() or exporting():
        return fn(*args)
    return checkpoint(fn, *args, use_reentrant=False)


def rerun_with_grad(
    fn: Callable, inputs: Sequence[Tensor], needs_grad: Sequence[bool]
) -> tuple[list[Tensor], Any]:
    """``fn`` rerun in an autograd Function's backward on the tensors it
    saved: on detached ``inputs`` that require gradients where
    ``needs_grad`` (the Function's ``ctx.needs_input_grad`` for them) says,
    with gradients enabled.

    Returns:
        tuple: The detached inputs (leaves) and ``fn(*leaves)``.
    """
    leaves = [t.detach().requires_grad_(n) for t, n in zip(inputs, needs_grad)]
    with torch.enable_grad():
        return leaves, fn(*leaves)


def leaf_grads(
    outputs: Sequence[Tensor],
    d_outputs: Sequence[Tensor],
    leaves: Sequence[Tensor],
) -> list[Tensor | None]:
    """Gradients of the :func:`rerun_with_grad` ``leaves`` given those of
    its ``outputs`` (cast to each output's dtype); None for a leaf that
    needs none or that the outputs do not depend on."""
    wanted = [t for t in leaves if t.requires_grad]
    pairs = [(o, d.to(o.dtype)) for o, d in zip(outputs, d_outputs)]
    pairs = [p for p in pairs if p[0].requires_grad]
    if not (wanted and pairs):
        return [None] * len(leaves)
    outputs, d_outputs = zip(*pairs)
    found = iter(
        torch.autograd.grad(outputs, wanted, d_outputs, allow_unused=True)
    )
    return [next(found) if t.requires_grad else None for t in leaves]


class OutputsOfStates(torch.autograd.Function):
    """``o = launch.output(q, states(*inputs))``, with the states
    recomputed in backward: saves q and ``inputs`` only.

    ``launch`` is one call's kernel launcher: ``output(q, states)`` gives
    o; ``query_grads(q, do, states)`` gives dq and the gradients of the
    states (detached and contiguous when the launcher gets them), which
    flow to ``inputs`` through the rerun ``states``.
    """

    @staticmethod
    def forward(ctx, q, launch, states, *inputs):
        o = launch.output(q, [t.contiguous() for t in states(*inputs)])
        ctx.save_for_backward(q, *inputs)
        ctx.launch, ctx.states = launch, states
        return o

    @staticmethod
    @once_differentiable
    def backward(ctx, do):
        q, *inputs = ctx.saved_tensors
        needs_grad = ctx.needs_input_grad[3:]
        leaves, states = rerun_with_grad(ctx.states, inputs, needs_grad)
        detached = [t.detach().contiguous() for t in states]
        dq, d_states = ctx.launch.query_grads(q, do, detached)
        return dq, None, None, *leaf_grads(states, d_states, leaves)
