from .distill_loss_decay import DistillLossDecayHook
from .init_hook import SoftmaxToLinearInitHook
from .mhla_clamp import MHLAMixingClampHook

__all__ = [
    'DistillLossDecayHook',
    'MHLAMixingClampHook',
    'SoftmaxToLinearInitHook',
]
