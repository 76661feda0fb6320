from .attention_map_mse import AttentionMapMSE
from .attention_output_mse import AttentionOutputMSE
from .distill_base import BlockwiseDistillLoss, DistillLoss
from .logit_kd import LogitKD

__all__ = [
    'AttentionMapMSE',
    'AttentionOutputMSE',
    'BlockwiseDistillLoss',
    'DistillLoss',
    'LogitKD',
]
