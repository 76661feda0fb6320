"""Optimizer wrappers that skip a parameter update whose loss or gradients
are not finite.

One NaN pixel in a batch makes the loss NaN, and one plain optimizer step
then turns every weight NaN. ``SkipNonFiniteOptimWrapper`` (registered in
mmpretrain's ``OPTIM_WRAPPERS``) checks the loss and the gradients before
the optimizer step. A bad update is skipped: the weights and the optimizer
state stay as they were and the gradients are cleared; a warning names the
iteration and the non-finite loss terms; after ``max_consecutive_skips``
skipped updates in a row training stops with a ``FloatingPointError``. On
finite steps it computes exactly what mmengine's ``OptimWrapper`` computes
(gradient clipping and accumulation included), at the cost of one gradient
norm and one device synchronisation per update.

``SkipNonFiniteAmpOptimWrapper`` is the mixed-precision form (what
``tools/train.py --amp`` selects). Its GradScaler already skips steps with
inf/NaN gradients, and lowers the loss scale, which happens routinely while
the scale settles; so on an accelerator only the loss is checked (a skipped
NaN loss leaves the scale as it was).

On the CPU it autocasts to bfloat16 without GradScaler
(:mod:`mmlvit.engine.optimizers.mixed_precision`) and checks the gradients too.

Launchers other than ``tools/train.py`` keep the guard: mmpretrain's own
``tools/train.py --amp`` (what ``mim train mmpretrain`` runs) replaces
``optim_wrapper.type`` by ``'AmpOptimWrapper'``, and in mmpretrain's
registry that name is :class:`GuardedAmpOptimWrapper`, the guarded
mixed-precision wrapper (``'mmengine.AmpOptimWrapper'`` still names
mmengine's own).

Notes:
    - The checks live in ``update_params`` (what ``BaseModel.train_step``
      calls); a model that calls ``backward``/``step`` itself is not
      guarded.
    - Gradient accumulation: the update of a window with a non-finite loss
      in any of its micro-batches is skipped.
    - Distributed training: every process back-propagates as usual and the
      decision is all-reduced, so all processes skip the same updates.
    - The loss terms are read from the dict the model's forward pass returns
      inside ``optim_context`` (a forward hook held for that pass only).
    - Learning-rate schedules still advance on a skipped iteration.
"""

import logging
import math
from contextlib import contextmanager

import torch
from mmengine import dist
from mmengine.logging import print_log
from mmengine.optim import OptimWrapper
from mmpretrain.registry import OPTIM_WRAPPERS

from .mixed_precision import MixedPrecisionOptimWrapper

SETTING = 'optim_wrapper.max_consecutive_skips'


def _detached(term):
    """A loss-dict entry without its graph."""
    if isinstance(term, (list, tuple)):
        return [_detached(t) for t in term]
    return term.detach() if isinstance(term, torch.Tensor) else term


def _value(term):
    """A loss-dict entry as a float (lists summed, as parse_losses does)."""
    if isinstance(term, (list, tuple)):
        return sum(_value(t) for t in term)
    if isinstance(term, torch.Tensor):
        return term.float().mean().item()
    return float(term)


class _SkipNonFinite:
    """The checks, mixed in before an ``OptimWrapper`` class.

    Every micro-batch is back-propagated as usual; when the update is due
    the losses of its window and (``check_gradients``) the gradients are
    checked with one device synchronisation, all-reduced across processes.

    Args:
        max_consecutive_skips (int): Stop training when this many updates in
            a row were skipped. Defaults to 10.
        **kwargs: The wrapper class's own arguments (``optimizer``,
            ``clip_grad``, ``accumulative_counts``, ``loss_scale``, ...).
    """

    check_gradients = True

    def __init__(self, *, max_consecutive_skips=10, **kwargs):
        if (
            isinstance(max_consecutive_skips, bool)
            or not isinstance(max_consecutive_skips, int)
            or max_consecutive_skips < 1
        ):
            raise ValueError(
                f'{SETTING} must be an integer >= 1, got '
                f'{max_consecutive_skips!r}.'
            )
        super().__init__(**kwargs)
        self.max_consecutive_skips = max_consecutive_skips
        self._skipped = []  # (first, last iteration) of each skip in a row
        self._window = []  # (iteration, loss, loss dict) since the update
        self._losses = None  # the dict the last forward pass returned

    @contextmanager
    def optim_context(self, model):
        """The wrapper's context, plus a hook that keeps the forward pass's
        loss dict so that a warning can name the non-finite terms."""
        handle = model.register_forward_hook(self._keep_losses)
        try:
            with super().optim_context(model):
                yield
        finally:
            handle.remove()

    def _keep_losses(self, module, args, output):
        self._losses = output if isinstance(output, dict) else None

    # Under compile=True mmengine compiles the model's train_step, this
    # call included: the checks read values on the host and the optimizer
    # step is no graph either, so it runs eagerly.
    @torch.compiler.disable
    def update_params(self, loss, step_kwargs=None, zero_kwargs=None):
        """Back-propagate ``loss``; when the update is due, update the
        parameters unless a loss of the window or a gradient is not finite
        (then clear the gradients and warn)."""
        losses, self._losses = self._losses, None
        loss = self.scale_loss(loss)
        self._window.append(
            (
                self._inner_count + 1,
                loss.detach(),
                {k: _detached(v) for k, v in (losses or {}).items()},
            )
        )
        self.backward(loss)
        if not self.should_update():
            return
        problems = self._problems(loss.device)
        if problems:
            self.zero_grad(**(zero_kwargs or {}))
            self._skip(problems)
        else:
            self.step(**(step_kwargs or {}))
            self.zero_grad(**(zero_kwargs or {}))
            self._skipped.clear()
        self._window = []

    def _gradients(self):
        return [
            p.grad
            for group in self.optimizer.param_groups
            for p in group['params']
            if p.grad is not None
        ]

    def _problems(self, device):
        """What is not finite in this window, on any process ([] if all
        is): one synchronisation, plus one all-reduce when distributed."""
        ok = torch.stack([torch.isfinite(w[1]).all() for w in self._window])
        ok = ok.all()
        if self.check_gradients:
            grads = self._gradients()
            if grads:  # the 2-norm: cheaper than the max; inf if it overflows
                norm = torch.nn.utils.get_total_norm(grads)
                ok = ok & torch.isfinite(norm).to(device)
        flag = (~ok).to(device=device, dtype=torch.int32).reshape(1)
        if dist.get_world_size() > 1:
            dist.all_reduce(flag, op='max')
        if not flag.item():
            return []
        problems = [
            self._loss_problem(iteration, loss, terms)
            for iteration, loss, terms in self._window
            if not torch.isfinite(loss).all()
        ]
        if not problems:
            problems = [self._gradient_problem()]
        return problems

    @staticmethod
    def _loss_problem(iteration, loss, terms):
        """'iteration i: the loss is nan (non-finite terms: ...)'."""
        values = {k: _value(v) for k, v in terms.items()}
        bad = [f'{k}={v:g}' for k, v in values.items() if not math.isfinite(v)]
        what = f'the loss is {_value(loss):g}'
        if bad:
            what += f' (non-finite terms: {", ".join(bad)})'
        return f'iteration {iteration}: {what}'

    def _gradient_problem(self):
        """What is wrong with the gradients of a window with finite losses
        (here or on another process)."""
        iteration = self._window[-1][0]
        grads = self._gradients()
        bad = sum(not bool(torch.isfinite(g).all()) for g in grads)
        if bad:
            what = (
                f'the loss is finite, but {bad} of {len(grads)} gradient '
                'tensors are not'
            )
        elif grads and not torch.isfinite(
            torch.nn.utils.get_total_norm(grads)
        ):
            what = 'the loss is finite, but the gradient norm overflows'
        else:
            what = (
                'the loss or the gradients are not finite on another process'
            )
        return f'iteration {iteration}: {what}'

    def _skip(self, problems):
        """Record a skipped update, warn, and stop after too many."""
        first, last = self._window[0][0], self._window[-1][0]
        self._skipped.append((first, last))
        span = (
            f'iteration {last}'
            if first == last
            else f'iterations {first}-{last}'
        )
        count = len(self._skipped)
        problems = '; '.join(problems)
        print_log(
            f'{problems[0].upper()}{problems[1:]}. Skipped the '
            f'parameter update of {span}: weights and optimizer state are '
            f'unchanged ({count} skipped in a row; training stops after '
            f'{self.max_consecutive_skips}, {SETTING}).',
            logger='current',
            level=logging.WARNING,
        )
        if count >= self.max_consecutive_skips:
            raise FloatingPointError(
                f'{count} parameter updates in a row were skipped because '
                f'the loss or the gradients were not finite (iterations '
                f'{self._skipped[0][0]}-{last}; last: {problems}). '
                'Training is stopped: look for NaN/Inf values or corrupt '
                'samples in these batches and check the learning rate; to '
                'tolerate longer runs of bad batches, raise '
                f'{SETTING} (now {self.max_consecutive_skips}).'
            )


@OPTIM_WRAPPERS.register_module()
class SkipNonFiniteOptimWrapper(_SkipNonFinite, OptimWrapper):
    """``OptimWrapper`` that skips updates with a non-finite loss or
    non-finite gradients (see the module docstring)."""


@OPTIM_WRAPPERS.register_module()
class SkipNonFiniteAmpOptimWrapper(_SkipNonFinite, MixedPrecisionOptimWrapper):
    """``MixedPrecisionOptimWrapper`` that skips updates with a non-finite
    loss; on an accelerator its GradScaler handles non-finite gradients, on
    the CPU (bfloat16, no GradScaler) the gradients are checked as well (see
    the module docstring)."""

    @property
    def check_gradients(self):
        return not self.loss_scaler.is_enabled()


@OPTIM_WRAPPERS.register_module(name='AmpOptimWrapper', force=True)
class GuardedAmpOptimWrapper(SkipNonFiniteAmpOptimWrapper):
    """What ``'AmpOptimWrapper'`` names in mmpretrain's registry: the
    guarded mixed-precision wrapper, so that a launcher that swaps the
    configured wrapper for ``AmpOptimWrapper`` (mmpretrain's ``train.py
    --amp``) keeps the guard, and runs on the CPU."""
