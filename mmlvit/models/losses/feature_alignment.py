"""Final-feature alignment: the features both heads classify, an extra to
the paper's loss."""

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS

from .distill_base import DistillLoss, check_choice

if TYPE_CHECKING:
    from mmlvit.models.distillers import AttentionRecording

DISTANCES = ('mse', 'cosine')


@MODELS.register_module()
class FinalFeatureAlignment(DistillLoss):
    """Distance between the features the student's and the teacher's heads
    classify.

    The compared features are each head's input (the ``features`` record):
    the backbone's final output after its neck, if any, e.g. the class
    token of a softmax ViT and the pooled patch tokens of a student whose
    operator mixes patch tokens only. Each is flattened to (B, D); both
    must have the same D.

    ``mse``: ``loss_weight * mean((f_s - f_t)^2)`` over batch and channels.
    ``cosine``: ``loss_weight * mean_b (1 - cos(f_s[b], f_t[b]))``.
    The unweighted distance is logged as ``feature_mse`` or
    ``feature_cosine_distance``.

    Args:
        loss_weight (float): Multiplies the distance. Defaults to 1.
        distance (str): ``'mse'`` (default) or ``'cosine'``.
    """

    records = ('features',)

    def __init__(
        self, loss_weight: float = 1.0, distance: str = 'mse'
    ) -> None:
        super().__init__(loss_weight)
        check_choice('FinalFeatureAlignment', 'distance', distance, DISTANCES)
        self.distance = distance

    def forward(
        self, student: 'AttentionRecording', teacher: 'AttentionRecording'
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Compare the heads' inputs.

        Args:
            student (AttentionRecording): ``features`` (B, D...).
            teacher (AttentionRecording): ``features`` (B, D...).

        Returns:
            tuple[Tensor, dict[str, Tensor]]: The weighted loss and the
            unweighted distance.
        """
        s = student.features.flatten(1).float()
        t = teacher.features.flatten(1).float()
        if s.shape != t.shape:
            raise ValueError(
                f'FinalFeatureAlignment: the student head sees features '
                f'{tuple(student.features.shape)}, the teacher head '
                f'{tuple(teacher.features.shape)}; they must have the same '
                'size.'
            )
        if self.distance == 'mse':
            value, name = F.mse_loss(s, t), 'feature_mse'
        else:
            cosine = F.cosine_similarity(s, t, dim=1)
            value, name = (1 - cosine).mean(), 'feature_cosine_distance'
        return self.loss_weight * value, {name: value.detach()}
