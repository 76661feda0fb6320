"""Keep the parameters copied from the softmax checkpoint frozen for the
first iterations of a conversion."""

from typing import TYPE_CHECKING

from mmengine.hooks import Hook
from mmpretrain.registry import HOOKS

from mmlvit.engine.optimizers.conversion_optim import COPIED

if TYPE_CHECKING:
    from mmengine.runner import Runner


@HOOKS.register_module()
class FreezeCopiedHook(Hook):
    """Train only the fresh parameters for the first ``iters`` iterations.

    The optimizer groups of ``ConversionAwareOptimWrapperConstructor``
    tagged ``copied`` by ``SoftmaxToLinearInitHook`` get learning rate 0 during
    each of those iterations (no gradient step and, with AdamW, no weight
    decay); their scheduled learning rate is put back before the schedulers
    step, so the schedule itself is unchanged.

    Args:
        iters (int): Iterations with the copied parameters frozen.
    """

    priority = 'NORMAL'  # after_train_iter before ParamSchedulerHook (LOW)

    def __init__(self, iters: int) -> None:
        if iters < 0:
            raise ValueError(f'FreezeCopiedHook: iters={iters} < 0.')
        self.iters = iters
        self._saved = None

    def before_train(self, runner: 'Runner') -> None:
        groups = runner.optim_wrapper.optimizer.param_groups
        if not any(COPIED in g for g in groups):
            raise ValueError(
                'FreezeCopiedHook needs optimizer groups tagged copied/fresh: '
                "set optim_wrapper.constructor='ConversionAwareOptimWrapper"
                "Constructor'."
            )
        if any(g[COPIED] is None for g in groups):
            raise ValueError(
                'FreezeCopiedHook: the optimizer groups are not tagged '
                'copied/fresh; SoftmaxToLinearInitHook tags them from its '
                'init setting: add it to custom_hooks.'
            )

    def before_train_iter(
        self, runner: 'Runner', batch_idx: int, data_batch=None
    ) -> None:
        if runner.iter >= self.iters:
            return
        groups = runner.optim_wrapper.optimizer.param_groups
        self._saved = [(g, g['lr']) for g in groups if g.get(COPIED)]
        for group, _ in self._saved:
            group['lr'] = 0.0

    def after_train_iter(
        self, runner: 'Runner', batch_idx: int, data_batch=None, outputs=None
    ) -> None:
        if self._saved is not None:
            for group, lr in self._saved:
                group['lr'] = lr
            self._saved = None
