"""Logit distillation (Hinton et al. 2015), an extra to the paper's loss."""

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS

from .distill_base import DistillLoss

if TYPE_CHECKING:
    from mmlvit.models.distillers import AttentionRecording


@MODELS.register_module()
class LogitKD(DistillLoss):
    """KL divergence between temperature-softened class distributions.

    ``loss = loss_weight * T^2 * KL(softmax(z_t / T) || softmax(z_s / T))``,
    summed over classes and averaged over the batch; the T^2 factor keeps
    gradient magnitudes independent of T. Logged (unweighted, without
    the T^2 factor) as ``logit_kl``.

    Args:
        loss_weight (float): Multiplies the loss. Defaults to 1.
        temperature (float): T > 0. Defaults to 1.
    """

    records = ('logits',)

    def __init__(
        self, loss_weight: float = 1.0, temperature: float = 1.0
    ) -> None:
        super().__init__(loss_weight)
        if temperature <= 0:
            raise ValueError(
                f'LogitKD: temperature must be > 0, got {temperature}.'
            )
        self.temperature = temperature

    def forward(
        self, student: 'AttentionRecording', teacher: 'AttentionRecording'
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Compare the heads' outputs.

        Args:
            student (AttentionRecording): ``logits`` (B, K).
            teacher (AttentionRecording): ``logits`` (B, K).

        Returns:
            tuple[Tensor, dict[str, Tensor]]: The weighted loss and the
            unweighted KL.
        """
        s, t = student.logits, teacher.logits
        if s.shape != t.shape:
            raise ValueError(
                f'LogitKD: student logits {tuple(s.shape)} and teacher '
                f'logits {tuple(t.shape)} differ; the heads must predict the '
                'same classes.'
            )
        T = self.temperature
        kl = F.kl_div(
            F.log_softmax(s.float() / T, dim=-1),
            F.log_softmax(t.float() / T, dim=-1),
            reduction='batchmean',
            log_target=True,
        )
        return self.loss_weight * T**2 * kl, {'logit_kl': kl.detach()}
