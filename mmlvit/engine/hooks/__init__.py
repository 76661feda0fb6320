from .checkpoint import SafeCheckpointHook
from .distill_loss_decay import DistillLossDecayHook
from .freeze_copied import FreezeCopiedHook
from .init_hook import SoftmaxToLinearInitHook
from .mhla_clamp import MHLAMixingClampHook
from .random_state import RandomStateHook
from .stages import ConversionStagesHook
from .strict_load import StrictLoadHook

__all__ = [
    'ConversionStagesHook',
    'DistillLossDecayHook',
    'FreezeCopiedHook',
    'MHLAMixingClampHook',
    'RandomStateHook',
    'SafeCheckpointHook',
    'SoftmaxToLinearInitHook',
    'StrictLoadHook',
]
