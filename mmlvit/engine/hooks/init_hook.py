"""Initialise a linear student from a softmax checkpoint before training."""

from typing import TYPE_CHECKING

import torch.nn as nn
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmpretrain.registry import HOOKS

from mmlvit.engine.optimizers.conversion_optim import tag_conversion_groups
from mmlvit.transfer import (
    CopyReport,
    SoftmaxCheckpoint,
    apply_init,
    plan_init,
    resolve_policy,
    softmax_checkpoint_of,
)

if TYPE_CHECKING:
    from mmengine.runner import Runner


def find_student(model: nn.Module) -> nn.Module:
    """The classifier to initialise: the model itself, or its ``student``
    when it is a distiller; DDP-style wrappers are unwrapped."""
    if is_model_wrapper(model):
        model = model.module
    return getattr(model, 'student', model)


@HOOKS.register_module()
class SoftmaxToLinearInitHook(Hook):
    """Copy the chosen components of a softmax checkpoint into the student.

    This hook states the run's init setting; what else needs it takes it
    from here:

    - ``before_run``: when the optimizer was built by
      ``ConversionAwareOptimWrapperConstructor``, its groups are tagged
      copied/fresh from this hook's plan (:func:`mmlvit.transfer.plan_init`)
      and given their learning-rate multipliers.
    - ``before_train`` (after mmengine's ``init_weights``, which would
      overwrite an earlier copy): the copy, and its table
      (:class:`mmlvit.transfer.CopyReport`) in the log. Nothing is copied
      when the run resumed or loaded a checkpoint (``after_load_checkpoint``
      was called): the weights then come from that checkpoint.

    The softmax weights are read once per run: from the model's
    :class:`mmlvit.transfer.SoftmaxCheckpoint` (a distiller's teacher
    checkpoint, already read for the teacher) or, when ``checkpoint``
    names another file, from the hook's own; they are released after
    ``before_train``.

    Args:
        checkpoint (str, optional): Softmax checkpoint file (any format of
            :func:`mmlvit.transfer.load_softmax_checkpoint`). Defaults to
            the distiller's ``teacher_checkpoint`` (a distillation run
            copies from its teacher's file). Settings that copy nothing
            (Random, Mimetic, Impulse) read no file.
        setting (str): Initialisation setting (``mmlvit.transfer.SETTINGS``:
            Random, Mimetic, Impulse, Copy, MLPCopy, FullCopy and its
            variants FullCopyNoClsToken, FullCopyNoClsTokenPosEmbed,
            FullCopyNoEmbeddings, also accepted as the paper's Variant1-3).
            Defaults to 'MLPCopy'.
        components (list[str], optional): Copy exactly these components
            instead of the setting's list (``mmlvit.transfer.COMPONENTS``).
        format (str): Layout of ``checkpoint``, or 'auto' (default) to
            detect it.
        copy_softmax_attention (bool): In a hybrid student, also copy the
            attention weights (``attn_qkv``, ``attn_proj``) of the blocks
            whose operator is softmax attention, whatever the setting.
            Defaults to False.

    Example:
        >>> custom_hooks = [dict(type='SoftmaxToLinearInitHook',
        ...                      checkpoint='deit_tiny_patch16_224.pth',
        ...                      setting='MLPCopy')]
    """

    priority = 'VERY_HIGH'

    def __init__(
        self,
        checkpoint: str | None = None,
        setting: str = 'MLPCopy',
        components: list[str] | None = None,
        format: str = 'auto',
        copy_softmax_attention: bool = False,
    ) -> None:
        self.policy = resolve_policy(setting, components)  # fail early
        self.copy_softmax_attention = copy_softmax_attention
        self.checkpoint = (
            None
            if checkpoint is None
            else SoftmaxCheckpoint(checkpoint, format)
        )
        self._loaded = False

    @property
    def reads_checkpoint(self) -> bool:
        """Whether the policy copies anything (Random, Mimetic and Impulse
        alone do not)."""
        return bool(self.policy.components) or self.copy_softmax_attention

    def before_run(self, runner: 'Runner') -> None:
        self._loaded = False
        tag_conversion_groups(
            runner.optim_wrapper,
            runner.model,
            lambda: self.plan(runner.model),
            runner.param_schedulers,
        )

    def after_load_checkpoint(
        self, runner: 'Runner', checkpoint: dict
    ) -> None:
        self._loaded = True

    def before_train(self, runner: 'Runner') -> None:
        try:
            if self._loaded:
                runner.logger.info(
                    'SoftmaxToLinearInitHook: the run resumed or loaded a '
                    'checkpoint; the softmax weights are not copied again.'
                )
                return
            report = self.initialise(runner.model)
            origin = ''
            if self.reads_checkpoint:
                origin = f'\n(from {self.source(runner.model).path})'
            runner.logger.info(report.table() + origin)
        finally:
            # Nothing reads the softmax weights after the init.
            for held in (self.checkpoint, softmax_checkpoint_of(runner.model)):
                if held is not None:
                    held.release()

    def source(
        self, model: nn.Module, checkpoint: str | None = None
    ) -> SoftmaxCheckpoint | None:
        """The softmax checkpoint to copy from: ``checkpoint`` if given,
        else the hook's; the model's when neither is set or when they name
        the model's file (it is then read once)."""
        wanted = (
            SoftmaxCheckpoint(checkpoint)
            if checkpoint is not None
            else self.checkpoint
        )
        held = softmax_checkpoint_of(model)
        if wanted is None or (
            held is not None and held.refers_to(wanted.path, wanted.format)
        ):
            return held
        return wanted

    def plan(self, model: nn.Module) -> CopyReport:
        """What :meth:`initialise` will do to the student of ``model``,
        without writing."""
        return plan_init(find_student(model), *self._arguments(model))

    def initialise(
        self, model: nn.Module, checkpoint: str | None = None
    ) -> CopyReport:
        """Apply the policy to the student of ``model``.

        Args:
            model (nn.Module): A classifier or a distiller (``student``).
            checkpoint (str, optional): Copy from this file instead.

        Returns:
            mmlvit.transfer.CopyReport
        """
        return apply_init(
            find_student(model), *self._arguments(model, checkpoint)
        )

    def _arguments(self, model, checkpoint=None):
        """``(state_dict, setting, components, copy_softmax_attention)``
        of :func:`plan_init`/:func:`apply_init`."""
        if not self.reads_checkpoint:
            state_dict = {}  # nothing to copy, nothing to read
        else:
            source = self.source(model, checkpoint)
            if source is None:
                raise ValueError(
                    'SoftmaxToLinearInitHook: setting '
                    f'{self.policy.setting.name} copies '
                    f'{list(self.policy.components)} but no softmax '
                    "checkpoint is set: set the hook's checkpoint "
                    "(custom_hooks=[dict(type='SoftmaxToLinearInitHook', "
                    'checkpoint=PATH, ...)]) or, in a distillation config, '
                    'model.teacher_checkpoint.'
                )
            state_dict = source.state_dict
        return (
            state_dict,
            self.policy.setting.name,
            self.policy.components,
            self.copy_softmax_attention,
        )
