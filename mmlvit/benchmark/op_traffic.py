"""Bytes a training step moves through memory, counted op by op on any
device.

A ``TorchDispatchMode`` sees every op a step runs: each reads its tensor
arguments and writes its results, so the sum of their sizes is what the
op moves through memory at least (an in-place op counts its tensor as
read and written). Views and bare allocations move nothing and are left
out. Fused Triton kernels run under Triton's interpreter on the CPU (as
the GPU path would launch them): each launch is counted once with the
sizes of its tensor arguments, the views it reads and the buffers it
writes, and the ops the interpreter itself runs are left out. That is a
kernel's traffic where it reads and writes each argument once, more than
it where a launch skips most of its arguments (GLA's launches per kind of
chunk are each given every chunk), less where it reads tiles again. What
a GPU's caches save is not seen either: the figures are bytes, not
timings.

Most of a ViT step's elementwise work is bound by memory bandwidth, so
these bytes, at a GPU's bandwidth, bound its time from below; products
(``mm``, ``addmm``) are counted too, but their time is set by FLOPs.

The fused reductions split their tokens into ranges until a launch has
enough programs (:func:`mmlvit.ops.fused_linear.function.token_splits`),
so one or two images split far more than a large batch and add up more
partial sums; :func:`token_splits_as_at` splits them as that batch would.
"""

import contextlib
from collections import Counter

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .tensor_memory import MIB

# Ops that allocate or alias storage without moving its bytes (views that
# are not marked as views among them).
ALLOCATIONS = frozenset(
    (
        'empty', 'empty_like', 'new_empty', 'empty_strided',
        'new_empty_strided', 'set_', 'lift_fresh', '_unsafe_view',
    )
)  # fmt: skip


def tensor_bytes(values) -> int:
    """Bytes of the tensors among ``values`` (nested), each as its view
    sees it."""
    return sum(
        t.numel() * t.element_size()
        for t in tree_leaves(values)
        if isinstance(t, torch.Tensor)
    )


class StepTraffic(TorchDispatchMode):
    """Counts bytes by ``(phase, name)``: ``name`` an op's (``aten::mm``)
    or a Triton kernel's (``triton::log_gate_kernel``); ``phase`` is set
    by the caller (``'forward'``, ``'backward'``)."""

    def __init__(self):
        super().__init__()
        self.bytes = Counter()
        self.phase = 'forward'
        self.in_kernel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if not (self.in_kernel or func.is_view or name in ALLOCATIONS):
            moved = tensor_bytes((args, kwargs)) + tensor_bytes(out)
            self.bytes[self.phase, f'aten::{name}'] += moved
        return out

    def launch(self, name, args):
        """Count one kernel launch on ``args``."""
        self.bytes[self.phase, f'triton::{name}'] += tensor_bytes(args)


@contextlib.contextmanager
def counting_traffic():
    """Yields a :class:`StepTraffic` counting the ops run in the block and
    the Triton kernels Triton's interpreter launches there."""
    counter = StepTraffic()
    with _kernel_launches(counter), counter:
        yield counter


@contextlib.contextmanager
def _kernel_launches(counter):
    """Route the interpreter's launches through ``counter`` while active
    (nothing to route where Triton does not import)."""
    try:
        from triton.runtime.interpreter import GridExecutor
    except ImportError:
        yield
        return
    original = GridExecutor.__call__

    def launch(executor, *args, **kwargs):
        counter.launch(executor.fn.__name__, args)
        counter.in_kernel += 1
        try:
            return original(executor, *args, **kwargs)
        finally:
            counter.in_kernel -= 1

    GridExecutor.__call__ = launch
    try:
        yield
    finally:
        GridExecutor.__call__ = original


@contextlib.contextmanager
def token_splits_as_at(batch_size: int, images: int):
    """While active, the fused reductions on ``images`` images split their
    tokens as on ``batch_size`` images: the programs a launch aims at
    (``TARGET_PROGRAMS``) scaled by ``images / batch_size``, so that
    B*H*splits reaches it at the same number of splits."""
    from mmlvit.ops.fused_linear import function

    target = function.TARGET_PROGRAMS
    function.TARGET_PROGRAMS = -(-target * images // batch_size)
    try:
        yield
    finally:
        function.TARGET_PROGRAMS = target


def step_traffic_mib(model: nn.Module, images: torch.Tensor, dtype) -> dict:
    """MiB moved by a training step of ``model`` on ``images`` (forward
    under autocast to ``dtype``, None: none; backward from ones), by
    ``(phase, name)``."""
    model.train()
    with counting_traffic() as counter:
        with torch.autocast(images.device.type, dtype, enabled=bool(dtype)):
            outs = [t for t in tree_leaves(model(images)) if t.requires_grad]
        counter.phase = 'backward'
        torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
    model.zero_grad(set_to_none=True)
    return {key: moved / MIB for key, moved in counter.bytes.items()}


def totals(figures: dict) -> dict:
    """MiB of the ops by phase (``forward``, ``backward``), of the Triton
    launches' arguments (``kernels``) and in all, from figures keyed by
    ``(phase, name)``."""
    out = Counter(forward=0.0, backward=0.0, kernels=0.0)
    for (phase, name), mib in figures.items():
        out['kernels' if name.startswith('triton::') else phase] += mib
        out['total'] += mib
    return dict(out)


def largest(figures: dict, count: int) -> list[tuple[str, str, float]]:
    """The ``count`` largest ``(phase, name, MiB)``, largest first."""
    rows = sorted(figures.items(), key=lambda item: -item[1])[:count]
    return [(phase, name, mib) for (phase, name), mib in rows]
