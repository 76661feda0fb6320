"""Keep MHLA's block-mixing matrices in [0, 1] during training."""

from mmengine.hooks import Hook
from mmpretrain.registry import HOOKS

from mmlvit.models.attentions.mhla import MHLAttention


@HOOKS.register_module()
class MHLAMixingClampHook(Hook):
    """Clamp the mixing matrix of every :class:`MHLAttention` to [0, 1]
    after each training iteration, i.e. after the optimiser step (as MHLA's
    official training script does).

    The modules are found anywhere in ``runner.model``, so wrapped models
    (DDP) and distillers holding the student work unchanged. The hook runs
    before EMA and checkpoint hooks (priority ABOVE_NORMAL), so both see the
    clamped weights.
    """

    priority = 'ABOVE_NORMAL'

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        for module in runner.model.modules():
            if isinstance(module, MHLAttention):
                module.clamp_mixing()
