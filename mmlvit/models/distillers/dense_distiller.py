"""DenseAttentionDistiller: a segmentor or detector with a linear ViT
backbone, distilled from a frozen softmax backbone."""

import torch
import torch.nn as nn
from mmpretrain.registry import MODELS

from .attention_distiller import AttentionDistiller


class BackboneTeacher(nn.Module):
    """A bare backbone in the place of a teacher classifier: its blocks sit
    at ``backbone.layers.{i}`` (where the recorder looks and where the
    softmax checkpoint's keys point) and it has no head.

    Args:
        backbone (nn.Module): The softmax ViT backbone.
    """

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = None

    def forward(self, inputs: torch.Tensor, mode: str = 'tensor'):
        """(B, C_in, H, W) -> the backbone's outputs; ``mode`` is accepted
        for the distiller's call and must be 'tensor'."""
        if mode != 'tensor':
            raise ValueError(f'A teacher backbone has no {mode!r} mode.')
        return self.backbone(inputs)


@MODELS.register_module()
class DenseAttentionDistiller(AttentionDistiller):
    """Convert a dense model in one run: a segmentor (MMSegmentation) or
    detector (MMDetection) whose backbone is a ``LinearVisionTransformer``
    trains on its task while every block's attention output is matched to
    the frozen softmax backbone's (the distillation of Qin et al. 2026,
    arXiv:2609.35745, applied during dense fine-tuning).

    Everything but the teacher is :class:`AttentionDistiller`'s: the same
    recording at ``backbone.layers.{i}.attn``, the same losses (default
    ``AttentionOutputMSE``), the student's own losses and data
    preprocessor, ``predict``/``tensor`` modes of the student, and
    checkpoints holding the student alone under its plain keys (an ordinary
    segmentor or detector checkpoint; ``--resume`` loads it back).

    The teacher is a softmax ViT backbone only: no neck, no heads. It runs
    in eval mode without gradients on the student's preprocessed (padded)
    batch, and is loaded from ``teacher_checkpoint`` (any file
    ``mmlvit.transfer.load_softmax_checkpoint`` reads; a classifier's
    head weights there are skipped).

    Args:
        student (dict | nn.Module): The segmentor or detector config, built
            in the caller's scope (mmseg or mmdet).
        teacher (dict): The softmax backbone config, built in mmpretrain's
            scope: ``type='VisionTransformer'`` is mmpretrain's ViT (or a
            ``LinearVisionTransformer`` with ``SoftmaxAttention``). It must
            have the student's depth and width.
        teacher_checkpoint (str): The softmax weights.
        distill_losses (list[dict]): As :class:`AttentionDistiller`'s;
            losses that compare logits are refused (the teacher has no
            head).
        data_preprocessor (dict, optional): See :class:`AttentionDistiller`.
        init_cfg (dict, optional): mmengine init config.

    Example:
        >>> model = dict(
        ...     type='mmpretrain.DenseAttentionDistiller',
        ...     student=segmentor,  # e.g. EncoderDecoder + UPerHead
        ...     teacher=dict(type='VisionTransformer', arch='b',
        ...                  img_size=512, patch_size=16),
        ...     teacher_checkpoint='deit-base.pth',
        ...     distill_losses=[dict(type='AttentionOutputMSE',
        ...                          loss_weight=50.)])
    """

    def build_teacher(self, cfg: dict) -> BackboneTeacher:
        """``BackboneTeacher`` around the backbone built from ``cfg`` in
        mmpretrain's scope, whatever the caller's."""
        with MODELS.switch_scope_and_registry('mmpretrain') as registry:
            return BackboneTeacher(registry.build(cfg))
