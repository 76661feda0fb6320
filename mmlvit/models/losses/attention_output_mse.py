"""Attention-output distillation, the paper's "distill what differs"."""

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS

from .distill_base import BlockwiseDistillLoss

if TYPE_CHECKING:
    from mmlvit.models.distillers import AttentionRecording

#: lambda of the paper (Qin et al. 2026, arXiv:2609.35745): the weight of
#: the attention-output distillation for every operator, dataset and
#: initialisation it reports.
PAPER_DISTILL_WEIGHT = 50.0


@MODELS.register_module()
class AttentionOutputMSE(BlockwiseDistillLoss):
    """Mean over blocks of the MSE between attention-module outputs.

    ``loss = loss_weight * mean_i MSE(student.layers[i].attn(x_s),
    teacher.layers[i].attn(x_t))``, each MSE averaged over batch, tokens and
    channels. The matched point is the attention module's output, after its
    output projection and before the residual addition: (B, N, C) on both
    sides. The per-block MSEs (unweighted) are logged as
    ``attn_out_mse.{i}``.

    Args:
        loss_weight (float): lambda. Defaults to
            :data:`PAPER_DISTILL_WEIGHT`, the paper's value for every
            operator, dataset and initialisation.
        blocks (str | list[int]): ``'all'`` (default) or block indices.
        tokens (str): ``'all'`` (default) or ``'patch'``; the patch tokens
            are matched when only one side has a class token.
    """

    records = ('outputs',)
    log_name = 'attn_out_mse'

    def __init__(
        self,
        loss_weight: float = PAPER_DISTILL_WEIGHT,
        blocks: str | list[int] = 'all',
        tokens: str = 'all',
    ) -> None:
        super().__init__(loss_weight, blocks=blocks, tokens=tokens)

    def forward(
        self, student: 'AttentionRecording', teacher: 'AttentionRecording'
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Compare two recordings.

        Args:
            student (AttentionRecording): ``outputs[i]`` (B, N_s, C).
            teacher (AttentionRecording): ``outputs[i]`` (B, N_t, C).

        Returns:
            tuple[Tensor, dict[str, Tensor]]: The weighted loss and the
            per-block MSEs.
        """

        def block_mse(i):
            s, t = self.match_tokens(
                student.outputs[i],
                teacher.outputs[i],
                student.num_extra_tokens,
                teacher.num_extra_tokens,
            )
            return F.mse_loss(s.float(), t.float())

        return self.mean_over_blocks(student.depth, block_mse)
