"""Accuracy of a classifier scored on a subset of its classes."""

from typing import Sequence

import torch
from mmpretrain.evaluation import Accuracy
from mmpretrain.registry import METRICS


@METRICS.register_module()
class SubsetAccuracy(Accuracy):
    """Top-k accuracy with predictions restricted to the dataset's classes.

    ImageNet-A and -R cover 200 of ImageNet-1K's classes. As in their
    official evaluation, a 1000-way classifier is scored on them after its
    scores are restricted to those 200 classes: arg-max (and top-k) run over
    the subset only. The subset is the ImageNet-1K indices in the dataset's
    ``metainfo['subset_labels']`` (set by
    :class:`mmlvit.datasets.ImageNetSubset`), which the runner hands to the
    metric as ``dataset_meta``. Scores are kept as the model gives them
    (N, num_classes) and sliced to (N, len(subset)); labels are mapped to
    their position in the subset.

    Args:
        topk, thrs, collect_device, prefix: As for
            :class:`mmpretrain.evaluation.Accuracy`.
    """

    def _subset(self) -> torch.Tensor:
        meta = self.dataset_meta or {}
        if 'subset_labels' not in meta:
            raise KeyError(
                "SubsetAccuracy needs the dataset's metainfo['subset_labels']"
                ' (the class indices to score on, e.g. from ImageNetSubset);'
                ' use Accuracy for a dataset that covers every class'
            )
        return torch.as_tensor(meta['subset_labels'], dtype=torch.long)

    def process(self, data_batch, data_samples: Sequence[dict]):
        """Store each sample's subset scores and label position."""
        subset = self._subset()
        for data_sample in data_samples:
            if 'pred_score' not in data_sample:
                raise KeyError(
                    'SubsetAccuracy needs pred_score (the scores '
                    'of every class) in the model outputs'
                )
            gt_label = data_sample['gt_label'].cpu()
            position = (subset == gt_label).nonzero().flatten()
            if position.numel() != 1:
                raise ValueError(
                    f'SubsetAccuracy: label {gt_label.tolist()} is not in '
                    "the dataset's subset_labels"
                )
            self.results.append(
                dict(
                    pred_score=data_sample['pred_score'].cpu()[subset],
                    gt_label=position,
                )
            )
