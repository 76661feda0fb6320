"""Staged conversion runs: which losses count and which student parameters
train, switched at stage boundaries within one run."""

from typing import TYPE_CHECKING

from mmengine.hooks import EMAHook, Hook
from mmengine.runner import EpochBasedTrainLoop
from mmpretrain.registry import HOOKS

from mmlvit.engine.stage_config import Stage, parse_stage, selects
from mmlvit.models.lora import ADAPTER_MARK, restore_unmerged, save_merged
from mmlvit.utils.model import student_of, unwrap_model

if TYPE_CHECKING:
    from mmengine.runner import Runner


@HOOKS.register_module()
class ConversionStagesHook(Hook):
    """Run a conversion in stages, each with its own losses, trainable
    student parameters and length.

    Each stage is a dict:

    - ``epochs`` or ``iters`` (int): its length. All stages use the same
      unit; together they span the whole run (``train_cfg.max_epochs`` or
      the run's total iterations). ``epochs`` needs an epoch-based loop.
    - ``losses`` (dict[str, float]): ``loss_weight`` of distillation losses
      by type name. The losses must be in ``model.distill_losses`` from the
      start (with weight 0 where a later stage turns them on); losses a stage
      does not name keep their weight from the config.
    - ``task_loss`` (bool | float): whether the student's own loss counts,
      or its weight. Defaults to True.
    - ``trainable`` (list[str], optional): name fragments of the student
      parameters that train, e.g. ``['attn']``; a parameter matches when a
      fragment occurs in its name relative to the student
      (``backbone.layers.0.attn.qkv.weight``). Defaults to all of them
      but the adapters.
    - ``frozen`` (list[str]): fragments of parameters that do not train,
      e.g. ``['ffn']``; applied after ``trainable``.

    Low-rank adapters (the distiller's ``adapters``, parameters named
    ``lora_A``/``lora_B``) train only in stages whose ``trainable`` has a
    fragment holding ``lora_``, e.g. ``['lora_', 'head']`` (the adapters and
    the head; the adapted weights stay as they are). Checkpoints hold the
    adapters merged into the weights, a plain classifier, plus their
    unmerged tensors under ``unmerged_adapters``, which a loaded checkpoint
    gives back (:func:`mmlvit.models.lora.restore_unmerged`), so a run
    resumed inside an adapter stage continues exactly.

    The stage follows from the loop's epoch (or iteration) alone, set before
    each training epoch (or iteration), so a run resumed inside stage k is
    in stage k. Parameters outside the stage's trainable set get
    ``requires_grad=False``: they stay in the optimizer, get no gradient and
    so no update (AdamW skips them, weight decay included). Parameters the
    model itself froze stay frozen. Under DDP, set
    ``model_wrapper_cfg=dict(type='MMDistributedDataParallel',
    find_unused_parameters=True)``.

    Args:
        stages (list[dict]): The stages, in order.
    """

    # Before StrictLoadHook (VERY_HIGH) compares a loaded checkpoint with
    # the model: the adapters must be back in its state dict by then.
    priority = 'HIGHEST'

    def __init__(self, stages: list[dict]) -> None:
        if not stages:
            raise ValueError('ConversionStagesHook needs at least one stage.')
        parsed = [parse_stage(k, cfg) for k, cfg in enumerate(stages, 1)]
        units = {unit for unit, _ in parsed}
        if len(units) > 1:
            raise ValueError(
                'ConversionStagesHook: give every stage its length in the '
                'same unit (all epochs= or all iters=).'
            )
        (self.unit,) = units
        self.stages = [stage for _, stage in parsed]
        self._current = None

    def before_train(self, runner: 'Runner') -> None:
        """Check the stages against the model and the loop."""
        distiller = self._distiller(runner)
        self._check_length(runner)
        self._losses = self._losses_by_name(distiller)
        self._base_weights = {
            name: loss.loss_weight for name, loss in self._losses.items()
        }
        self._params = {
            name: param
            for name, param in distiller.student.named_parameters()
            if param.requires_grad
        }
        self._adapters = [n for n in self._params if ADAPTER_MARK in n]
        for number, stage in enumerate(self.stages, 1):
            self._check_stage(number, stage)
        if self._adapters and any(
            isinstance(h, EMAHook) for h in runner.hooks
        ):
            raise ValueError(
                'ConversionStagesHook: EMAHook cannot average a student with '
                'adapters (checkpoints merge them into plain weights): '
                'drop EMAHook or model.adapters.'
            )
        if self._adapters and not any(
            stage.trains(name)
            for stage in self.stages
            for name in self._adapters
        ):
            raise ValueError(
                'ConversionStagesHook: the student has adapters '
                "(model.adapters) but no stage trains them: add 'lora_' to "
                "a stage's trainable, e.g. trainable=['lora_', 'head'], or "
                'drop model.adapters.'
            )
        self._current = None

    def before_save_checkpoint(
        self, runner: 'Runner', checkpoint: dict
    ) -> None:
        """Save the student's adapters merged (a plain classifier), with
        their unmerged tensors to resume with (:func:`save_merged`)."""
        save_merged(checkpoint, self._distiller(runner).student)

    def after_load_checkpoint(
        self, runner: 'Runner', checkpoint: dict
    ) -> None:
        """Give the student's adapters back to a loaded checkpoint
        (:func:`restore_unmerged`)."""
        student = student_of(runner.model)
        if student is not None:
            restore_unmerged(checkpoint, student)

    def before_train_epoch(self, runner: 'Runner') -> None:
        if self.unit == 'epochs':
            self._enter(runner, self.stage_at(runner.epoch))

    def before_train_iter(
        self, runner: 'Runner', batch_idx: int, data_batch=None
    ) -> None:
        if self.unit == 'iters':
            self._enter(runner, self.stage_at(runner.iter))

    def stage_at(self, position: int) -> int:
        """The index of the stage that epoch (or iteration) ``position``
        (from 0) belongs to."""
        end = 0
        for index, stage in enumerate(self.stages):
            end += stage.length
            if position < end:
                return index
        return len(self.stages) - 1

    def _enter(self, runner: 'Runner', index: int) -> None:
        if index == self._current:
            return
        stage = self.stages[index]
        weights = {**self._base_weights, **stage.losses}
        for name, loss in self._losses.items():
            loss.loss_weight = weights[name]
        self._distiller(runner).task_scale = stage.task_weight
        for name, param in self._params.items():
            param.requires_grad_(stage.trains(name))
        self._current = index
        start = sum(s.length for s in self.stages[:index]) + 1
        trained = sum(stage.trains(name) for name in self._params)
        runner.logger.info(
            f'stage {index + 1}/{len(self.stages)}: {self.unit} {start}-'
            f'{start + stage.length - 1}, task loss x{stage.task_weight:g}, '
            + ', '.join(f'{n}={w:g}' for n, w in weights.items())
            + f', {trained}/{len(self._params)} student parameter tensors '
            'train'
        )

    def _check_stage(self, number: int, stage: Stage) -> None:
        where = f'ConversionStagesHook: stage {number}'
        for name in stage.losses:
            if name not in self._losses:
                raise ValueError(
                    f'{where} sets the weight of {name}, which is not in '
                    f'model.distill_losses ({", ".join(self._losses)}). A '
                    'stage only changes weights: add '
                    f"dict(type='{name}', loss_weight=0.0) to "
                    'model.distill_losses.'
                )
        for fragment in stage.trainable or ():
            if ADAPTER_MARK in fragment and not self._adapters:
                raise ValueError(
                    f"{where}: '{fragment}' names adapters but the student "
                    'has none: set model.adapters, e.g. dict(rank=4).'
                )
            if not any(selects(fragment, name) for name in self._params):
                raise ValueError(
                    f"{where}: '{fragment}' matches no trainable student "
                    'parameter name'
                    + (
                        " (adapters train only when a fragment holds 'lora_')."
                        if any(fragment in name for name in self._adapters)
                        else '.'
                    )
                )
        for fragment in stage.frozen:
            if not any(fragment in name for name in self._params):
                raise ValueError(
                    f"{where}: '{fragment}' matches no trainable student "
                    'parameter name.'
                )
        if not any(stage.trains(name) for name in self._params):
            raise ValueError(f'{where} trains no student parameter.')
        weights = {**self._base_weights, **stage.losses}
        if stage.task_weight == 0 and not any(weights.values()):
            raise ValueError(f'{where} has every loss weighted 0.')

    def _check_length(self, runner: 'Runner') -> None:
        total = sum(stage.length for stage in self.stages)
        if self.unit == 'epochs':
            if not isinstance(runner.train_loop, EpochBasedTrainLoop):
                raise ValueError(
                    'ConversionStagesHook: stages in epochs need an '
                    'epoch-based loop; give them in iters= instead.'
                )
            expected, setting = runner.max_epochs, 'train_cfg.max_epochs'
        else:
            expected, setting = runner.max_iters, 'the total iterations'
        if total != expected:
            raise ValueError(
                f'ConversionStagesHook: the stages last {total} {self.unit} '
                f'but {setting} is {expected}: make them add up.'
            )

    @staticmethod
    def _losses_by_name(distiller) -> dict:
        losses = {}
        for loss in distiller.distill_losses:
            name = type(loss).__name__
            if name in losses:
                raise ValueError(
                    f'ConversionStagesHook: model.distill_losses holds '
                    f'{name} twice, so a stage cannot name one of them.'
                )
            losses[name] = loss
        return losses

    @classmethod
    def _distiller(cls, runner: 'Runner'):
        model = unwrap_model(runner.model)
        if not hasattr(model, 'task_scale'):
            raise TypeError(
                'ConversionStagesHook needs an AttentionDistiller model, got '
                f'{type(model).__name__}.'
            )
        return model
