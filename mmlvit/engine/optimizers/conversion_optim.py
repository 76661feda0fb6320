"""Conversion-aware optimisation: fresh and copied parameters get their own
learning rates.

A student initialised from a softmax checkpoint has two kinds of
parameters: those copied from the checkpoint (e.g. the MLPs under MLPCopy)
and fresh ones (the linear attention, gates, ...). Conversion recipes
(e.g. the DeiT-to-TTT conversion of Transformer-to-TTT) train the fresh ones
faster (``new-params-lr-multiplier``) or keep the copied ones frozen for a
while (``freeze-pretrained``). :class:`ConversionAwareOptimWrapperConstructor`
puts every parameter in its own group; before training
``SoftmaxToLinearInitHook``, which states the init, tags each group
``copied`` True/False from its plan and scales the fresh and copied learning
rates (:func:`tag_conversion_groups`); ``FreezeCopiedHook`` sets the copied
groups' learning rate to 0 for the first iterations. The init setting is
stated once, on the hook, and the groups follow the very plan it copies by.
"""

from collections.abc import Callable

import torch.nn as nn
from mmengine.logging import print_log
from mmengine.optim import DefaultOptimWrapperConstructor, OptimWrapper
from mmpretrain.registry import OPTIM_WRAPPER_CONSTRUCTORS

from mmlvit.transfer import CopyReport
from mmlvit.utils.model import student_of, unwrap_model

COPIED = 'copied'  # the param-group tag: True, False, or None (not yet)


def _student_prefix(model):
    """The prefix of the student's parameter names in ``model`` ('' or
    'student.')."""
    return 'student.' if student_of(model) is not None else ''


def copied_parameter_names(model: nn.Module, report: CopyReport) -> set[str]:
    """Names (in ``model``) of the parameters an init copied, wholly or in
    part (e.g. TTT's standard qkv rows)."""
    prefix = _student_prefix(model)
    return {prefix + key for key in report.keys('copied')}


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class ConversionAwareOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """mmengine's default constructor with one group per parameter, each
    to be tagged ``copied`` and given a learning-rate multiplier by
    ``SoftmaxToLinearInitHook`` before training (the run needs that hook).

    ``paramwise_cfg`` takes mmengine's usual keys (``norm_decay_mult``,
    ``custom_keys``, ...) plus:

    - ``fresh_lr_mult`` (float): multiplies the learning rate of parameters
      the init does not copy. Defaults to 1.
    - ``copied_lr_mult`` (float): the same for copied parameters. Defaults
      to 1.

    Example:
        >>> optim_wrapper = dict(
        ...     constructor='ConversionAwareOptimWrapperConstructor',
        ...     paramwise_cfg=dict(fresh_lr_mult=10.0))
    """

    def __init__(
        self, optim_wrapper_cfg: dict, paramwise_cfg: dict | None = None
    ) -> None:
        paramwise_cfg = dict(paramwise_cfg or {})
        self.lr_mults = {
            True: float(paramwise_cfg.pop('copied_lr_mult', 1.0)),
            False: float(paramwise_cfg.pop('fresh_lr_mult', 1.0)),
        }
        if 'init' in paramwise_cfg:
            raise ValueError(
                'ConversionAwareOptimWrapperConstructor: remove '
                'paramwise_cfg.init; the groups follow the setting of '
                'SoftmaxToLinearInitHook, stated once in custom_hooks.'
            )
        # A non-empty paramwise_cfg makes the default constructor give
        # every parameter its own group.
        paramwise_cfg.setdefault('custom_keys', {})
        super().__init__(optim_wrapper_cfg, paramwise_cfg)

    def __call__(self, model: nn.Module) -> OptimWrapper:
        optim_wrapper = super().__call__(model)
        for group in optim_wrapper.optimizer.param_groups:
            group[COPIED] = None
        optim_wrapper.conversion_lr_mults = dict(self.lr_mults)
        return optim_wrapper


def tag_conversion_groups(
    optim_wrapper: OptimWrapper,
    model: nn.Module,
    plan: Callable[[], CopyReport],
    param_schedulers: list | dict | None = None,
) -> None:
    """Tag the groups of a conversion-aware optimizer ``copied`` True/False
    by the init's plan and multiply their learning rates; do nothing for
    another optimizer (``plan`` is then not called).

    The scheduled learning rates move with the groups' (``initial_lr``
    and the schedulers' ``base_values``), so a schedule runs as if the
    multipliers had been there from the start.

    Args:
        optim_wrapper (OptimWrapper): Built by
            :class:`ConversionAwareOptimWrapperConstructor` or not.
        model (nn.Module): The model whose parameters it optimises.
        plan (Callable[[], CopyReport]): The init's plan, asked for only
            when needed.
        param_schedulers (list | dict, optional): The runner's schedulers.
    """
    mults = getattr(optim_wrapper, 'conversion_lr_mults', None)
    if mults is None:
        return
    copied = copied_parameter_names(model, plan())
    names = {id(p): n for n, p in unwrap_model(model).named_parameters()}
    groups = optim_wrapper.optimizer.param_groups
    scaled = {}
    counts = {True: 0, False: 0}
    for index, group in enumerate(groups):
        (param,) = group['params']
        tag = names[id(param)] in copied
        group[COPIED] = tag
        scaled[index] = mults[tag]
        for key in ('lr', 'initial_lr'):
            if key in group:
                group[key] *= mults[tag]
        if param.requires_grad:
            counts[tag] += 1
    for scheduler in _schedulers(param_schedulers):
        # A scheduler's groups are the optimizer's, in order (the wrapper
        # may append its base settings after them).
        if scheduler.param_name == 'lr' and scheduler.optimizer in (
            optim_wrapper,
            optim_wrapper.optimizer,
        ):
            for index, mult in scaled.items():
                scheduler.base_values[index] *= mult
    print_log(
        f'Conversion-aware optimizer: {counts[True]} copied parameter '
        f'tensors at {mults[True]:g} x lr, {counts[False]} fresh ones at '
        f'{mults[False]:g} x lr.',
        logger='current',
    )


def _schedulers(param_schedulers):
    if param_schedulers is None:
        return []
    if isinstance(param_schedulers, dict):
        return [s for group in param_schedulers.values() for s in group]
    return list(param_schedulers)
