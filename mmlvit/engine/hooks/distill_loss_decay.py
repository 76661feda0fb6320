"""A linear schedule for the distillation weight lambda."""

from typing import TYPE_CHECKING

from mmengine.hooks import Hook
from mmpretrain.registry import HOOKS

from mmlvit.utils.model import unwrap_model

if TYPE_CHECKING:
    from mmengine.runner import Runner


@HOOKS.register_module()
class DistillLossDecayHook(Hook):
    """Decay ``loss_distill`` of an ``AttentionDistiller`` linearly.

    Before every training iteration the distiller's ``distill_scale`` is set
    to ``1 + (end_factor - 1) * iter / max_iters``: lambda at the first
    iteration, ``end_factor * lambda`` after the last one. The scale follows
    from the iteration alone, so a resumed run continues the schedule.
    Without this hook lambda stays constant (the paper's protocol).

    Args:
        end_factor (float): Fraction of lambda left at the end of training.
            Defaults to 0.
    """

    priority = 'NORMAL'

    def __init__(self, end_factor: float = 0.0) -> None:
        if end_factor < 0:
            raise ValueError(
                f'DistillLossDecayHook: end_factor must be >= 0, got '
                f'{end_factor}.'
            )
        self.end_factor = end_factor

    def before_train_iter(
        self, runner: 'Runner', batch_idx: int, data_batch=None
    ) -> None:
        model = unwrap_model(runner.model)
        if not hasattr(model, 'distill_scale'):
            raise TypeError(
                'DistillLossDecayHook needs an '
                'AttentionDistiller model, got '
                f'{type(model).__name__}.'
            )
        progress = runner.iter / runner.max_iters
        model.distill_scale = 1 + (self.end_factor - 1) * progress
