"""Initialise a linear student from a softmax checkpoint before training."""

from typing import TYPE_CHECKING

import torch.nn as nn
from mmengine.hooks import Hook
from mmpretrain.registry import HOOKS

from mmlvit.engine.optimizers.conversion_optim import tag_conversion_groups
from mmlvit.transfer import (
    CopyReport,
    SoftmaxCheckpoint,
    model_init,
    resolve_policy,
    softmax_checkpoint_of,
)

# Deprecated here: import it from mmlvit.utils.model.
from mmlvit.utils.model import find_student  # noqa: F401

if TYPE_CHECKING:
    from mmengine.runner import Runner


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
        return model_init.reads_checkpoint(
            self.policy, self.copy_softmax_attention
        )

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
        the model's file (it is then read once;
        :func:`mmlvit.transfer.model_init.choose_source`)."""
        return model_init.choose_source(model, self._checkpoint(checkpoint))

    def plan(self, model: nn.Module) -> CopyReport:
        """What :meth:`initialise` will do to the student of ``model``,
        without writing."""
        return model_init.plan_initialise(model, *self._arguments())

    def initialise(
        self, model: nn.Module, checkpoint: str | None = None
    ) -> CopyReport:
        """Apply the policy to the student of ``model``
        (:func:`mmlvit.transfer.model_init.initialise`).

        Args:
            model (nn.Module): A classifier or a distiller (``student``).
            checkpoint (str, optional): Copy from this file instead.

        Returns:
            mmlvit.transfer.CopyReport
        """
        return model_init.initialise(model, *self._arguments(checkpoint))

    def _checkpoint(self, checkpoint):
        """``checkpoint`` (read in its detected layout) if given, else the
        hook's."""
        return self.checkpoint if checkpoint is None else checkpoint

    def _arguments(self, checkpoint=None):
        """``(checkpoint, setting, components, copy_softmax_attention)``
        of :func:`mmlvit.transfer.model_init.initialise`."""
        return (
            self._checkpoint(checkpoint),
            self.policy.setting.name,
            self.policy.components,
            self.copy_softmax_attention,
        )
