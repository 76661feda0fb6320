"""Bytes a training step moves through memory, counted op by op on any
device.

A ``TorchDispatchMode`` sees every op a step runs: each reads its tensor
arguments and writes its results, so the sum of their sizes is what the
op moves through memory at least (an in-place op counts its tensor as
read and written). Views and bare allocations move nothing and are left
out. Fused Triton kernels run under Triton's interpreter on the CPU (as
the GPU path would launch them), and the ops the interpreter itself runs
are left out: each launch counts the distinct bytes its programs load
and store (:class:`LaunchBytes`, from the addresses of the elements
their masks let through, each address once per launch). That is what a
launch moves at least: tiles its programs read more than once count
once, as if the GPU's caches kept them, and buffers or chunks it skips
count nothing. What caches save between ops is not seen: the figures
are bytes, not timings.

Most of a ViT step's elementwise work is bound by memory bandwidth, so
these bytes, at a GPU's bandwidth, bound its time from below; products
(``mm``, ``addmm``) are counted too, but their time is set by FLOPs.

The fused reductions split their tokens into ranges until a launch has
enough programs (:func:`mmlvit.ops.common.linear_launch.token_splits`),
so one or two images split far more than a large batch and add up more
partial sums; :func:`token_splits_as_at` splits them as that batch would.
"""

import contextlib
from collections import Counter, defaultdict

import numpy as np
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

    def launch(self, name, moved):
        """Count one kernel launch that moved ``moved`` bytes."""
        self.bytes[self.phase, f'triton::{name}'] += moved


class LaunchBytes:
    """The distinct bytes one kernel launch loads and stores, from the
    addresses Triton's interpreter loads and stores (masked-in elements
    only), each address counted once per direction."""

    def __init__(self):
        self.addresses = defaultdict(_DistinctAddresses)

    def add(self, kind, pointers, mask):
        """Note a ``'load'`` or ``'store'`` of ``pointers`` (the
        interpreter's tensor of addresses) under ``mask``."""
        width = pointers.get_element_ty().primitive_bitwidth // 8
        addresses, keep = np.broadcast_arrays(pointers.data, mask.data)
        self.addresses[kind, width].add(addresses[keep.astype(bool)])

    def total(self) -> int:
        """Distinct bytes loaded plus distinct bytes stored."""
        return sum(
            width * seen.count() for (_, width), seen in self.addresses.items()
        )


class _DistinctAddresses:
    """A growing set of addresses: arrays are kept as they come and merged
    into one sorted array of distinct ones once they outgrow it (so each
    address is sorted O(log) times in all)."""

    def __init__(self):
        self.distinct = np.empty(0, np.uint64)
        self.pending, self.size = [], 0

    def add(self, addresses):
        self.pending.append(addresses.ravel().astype(np.uint64, copy=False))
        self.size += addresses.size
        if self.size > max(self.distinct.size, 1 << 16):
            self._merge()

    def _merge(self):
        self.distinct = np.unique(
            np.concatenate([self.distinct, *self.pending])
        )
        self.pending, self.size = [], 0

    def count(self) -> int:
        self._merge()
        return self.distinct.size


@contextlib.contextmanager
def counting_traffic():
    """Yields a :class:`StepTraffic` counting the ops run in the block and
    the Triton kernels Triton's interpreter launches there."""
    counter = StepTraffic()
    with _kernel_launches(counter), counter:
        yield counter


@contextlib.contextmanager
def _kernel_launches(counter):
    """Count the interpreter's launches and their loads and stores in
    ``counter`` while active (nothing to count where Triton does not
    import)."""
    try:
        from triton.runtime.interpreter import (
            GridExecutor,
            InterpreterBuilder,
        )
    except ImportError:
        yield
        return
    originals = (
        GridExecutor.__call__,
        InterpreterBuilder.create_masked_load,
        InterpreterBuilder.create_masked_store,
    )
    run, load, store = originals
    moving = []  # the LaunchBytes of the launch running

    def launch(executor, *args, **kwargs):
        moving.append(LaunchBytes())
        counter.in_kernel += 1
        try:
            return run(executor, *args, **kwargs)
        finally:
            counter.in_kernel -= 1
            counter.launch(executor.fn.__name__, moving.pop().total())

    def masked_load(builder, pointers, mask, *args, **kwargs):
        moving[-1].add('load', pointers, mask)
        return load(builder, pointers, mask, *args, **kwargs)

    def masked_store(builder, pointers, value, mask, *args, **kwargs):
        moving[-1].add('store', pointers, mask)
        return store(builder, pointers, value, mask, *args, **kwargs)

    GridExecutor.__call__ = launch
    InterpreterBuilder.create_masked_load = masked_load
    InterpreterBuilder.create_masked_store = masked_store
    try:
        yield
    finally:
        (
            GridExecutor.__call__,
            InterpreterBuilder.create_masked_load,
            InterpreterBuilder.create_masked_store,
        ) = originals


@contextlib.contextmanager
def token_splits_as_at(batch_size: int, images: int):
    """While active, the fused reductions on ``images`` images split their
    tokens as on ``batch_size`` images: the programs a launch aims at
    (``TARGET_PROGRAMS``) scaled by ``images / batch_size``, so that
    B*H*splits reaches it at the same number of splits."""
    from mmlvit.ops.common import linear_launch as function

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
