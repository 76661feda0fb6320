"""Softmax-to-linear initialisation of a whole model.

:func:`initialise` applies a setting to the student of a model (the model
itself, or a distiller's ``student``; wrappers are unwrapped) from a
softmax checkpoint; :func:`plan_initialise` says what it would do without
writing. The checkpoint is chosen by :func:`choose_source`: a distiller
already holds its teacher's :class:`~.source.SoftmaxCheckpoint`, and a
checkpoint naming that file is read once.
"""

from collections.abc import Sequence

import torch.nn as nn

from mmlvit.utils.model import find_student

from .policies import Policy, apply_init, plan_init, resolve_policy
from .report import CopyReport
from .source import (
    SoftmaxCheckpoint,
    backbone_img_size,
    softmax_checkpoint_of,
)


def choose_source(
    model: nn.Module, checkpoint: SoftmaxCheckpoint | str | None = None
) -> SoftmaxCheckpoint | None:
    """The softmax checkpoint to copy from: ``checkpoint``; the model's
    (:func:`~.source.softmax_checkpoint_of`) when it is None or names the
    model's file (it is then read once)."""
    if checkpoint is not None and not isinstance(
        checkpoint, SoftmaxCheckpoint
    ):
        checkpoint = SoftmaxCheckpoint(checkpoint)
    held = softmax_checkpoint_of(model)
    if checkpoint is None or (
        held is not None and held.refers_to(checkpoint.path, checkpoint.format)
    ):
        return held
    return checkpoint


def reads_checkpoint(policy: Policy, copy_softmax_attention: bool) -> bool:
    """Whether an init copies anything (Random, Mimetic and Impulse alone
    do not)."""
    return bool(policy.components) or copy_softmax_attention


def initialise(
    model: nn.Module,
    checkpoint: SoftmaxCheckpoint | str | None = None,
    setting: str = 'MLPCopy',
    components: Sequence[str] | None = None,
    copy_softmax_attention: bool = False,
) -> CopyReport:
    """Apply an init setting to the student of ``model``, in place.

    Args:
        model (nn.Module): A classifier or a distiller (``student``),
            wrapped or not.
        checkpoint (SoftmaxCheckpoint | str, optional): The softmax
            checkpoint (a path is read in its detected layout). Defaults to
            the model's own (a distiller's teacher checkpoint).
        setting (str): A setting's name or alias. Defaults to 'MLPCopy'.
        components (Sequence[str], optional): Copy these components
            instead of the setting's (:func:`~.policies.resolve_policy`).
        copy_softmax_attention (bool): Also copy the attention of a hybrid
            student's softmax blocks (:func:`~.policies.apply_init`).

    Returns:
        CopyReport

    Raises:
        ValueError: The setting copies something and no checkpoint is set.
        TransferError: The policy cannot be applied (nothing is written).
    """
    return apply_init(
        find_student(model),
        *_arguments(
            model, checkpoint, setting, components, copy_softmax_attention
        ),
    )


def plan_initialise(
    model: nn.Module,
    checkpoint: SoftmaxCheckpoint | str | None = None,
    setting: str = 'MLPCopy',
    components: Sequence[str] | None = None,
    copy_softmax_attention: bool = False,
) -> CopyReport:
    """What :func:`initialise` will do to the student of ``model``,
    without writing (same arguments)."""
    return plan_init(
        find_student(model),
        *_arguments(
            model, checkpoint, setting, components, copy_softmax_attention
        ),
    )


def _arguments(model, checkpoint, setting, components, attention):
    """``(state_dict, setting, components, copy_softmax_attention)`` of
    :func:`~.policies.plan_init`/:func:`~.policies.apply_init`."""
    policy = resolve_policy(setting, components)
    if not reads_checkpoint(policy, attention):
        state_dict = {}  # nothing to copy, nothing to read
    else:
        source = choose_source(model, checkpoint)
        if source is None:
            raise ValueError(
                'SoftmaxToLinearInitHook: setting '
                f'{policy.setting.name} copies '
                f'{list(policy.components)} but no softmax '
                "checkpoint is set: set the hook's checkpoint "
                "(custom_hooks=[dict(type='SoftmaxToLinearInitHook', "
                'checkpoint=PATH, ...)]) or, in a distillation config, '
                'model.teacher_checkpoint.'
            )
        source.fit_img_size(backbone_img_size(find_student(model)))
        state_dict = source.state_dict
    return state_dict, policy.setting.name, policy.components, attention
