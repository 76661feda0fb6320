"""Keep the parameters copied from the softmax checkpoint frozen for the
first iterations of a conversion."""

from mmengine.hooks import Hook
from mmpretrain.registry import HOOKS

from mmlvit.engine.conversion_optim import COPIED


@HOOKS.register_module()
class FreezeCopiedHook(Hook):
    """Train only the fresh parameters for the first ``iters`` iterations.

    The optimizer groups tagged ``copied`` by
    ``ConversionAwareOptimWrapperConstructor`` get learning rate 0 during
    each of those iterations (no gradient step and, with AdamW, no weight
    decay); their scheduled learning rate is put back before the schedulers
    step, so the schedule itself is unchanged.

    Args:
        iters (int): Iterations with the copied parameters frozen.
    """

    priority = 'NORMAL'  # after_train_iter before ParamSchedulerHook (LOW)

    def __init__(self, iters):
        if iters < 0:
            raise ValueError(f'FreezeCopiedHook: iters={iters} < 0.')
        self.iters = iters
        self._saved = None

    def before_train(self, runner):
        groups = runner.optim_wrapper.optimizer.param_groups
        if not any(COPIED in g for g in groups):
            raise ValueError(
                'FreezeCopiedHook needs optimizer groups tagged copied/fresh: '
                "set optim_wrapper.constructor='ConversionAwareOptimWrapper"
                "Constructor'."
            )

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        if runner.iter >= self.iters:
            return
        groups = runner.optim_wrapper.optimizer.param_groups
        self._saved = [(g, g['lr']) for g in groups if g.get(COPIED)]
        for group, _ in self._saved:
            group['lr'] = 0.0

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        if self._saved is not None:
            for group, lr in self._saved:
                group['lr'] = lr
            self._saved = None
