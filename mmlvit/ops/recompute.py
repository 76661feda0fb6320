"""Recompute an operator's intermediates in backward instead of keeping
them.

Operators whose forward is a chain of cheap token-wise steps in fp32 (TTT's
inner step: N x d products, gates and SiLUs) would keep every N-sized fp32
intermediate for backward, several times the memory of its inputs.
:func:`recomputed` keeps only the inputs and reruns the chain in backward
(activation checkpointing of one op): the extra cost is one forward of the
op, small beside the projections around it.
"""

from collections.abc import Callable

import torch
from torch import Tensor
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
