from .attention_map_mse import AttentionMapMSE
from .attention_output_mse import PAPER_DISTILL_WEIGHT, AttentionOutputMSE
from .distill_base import (
    BlockwiseDistillLoss,
    DistillLoss,
    registered_distill_losses,
)
from .feature_alignment import FinalFeatureAlignment
from .logit_kd import LogitKD

__all__ = [
    'PAPER_DISTILL_WEIGHT',
    'AttentionMapMSE',
    'AttentionOutputMSE',
    'BlockwiseDistillLoss',
    'DistillLoss',
    'FinalFeatureAlignment',
    'LogitKD',
    'registered_distill_losses',
]
