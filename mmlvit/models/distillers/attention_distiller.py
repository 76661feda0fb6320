"""AttentionDistiller: a student trained against a frozen softmax teacher."""

import copy

import torch
import torch.nn as nn
from mmengine.model import BaseModel
from mmpretrain.registry import MODELS

from mmlvit.transfer import SoftmaxCheckpoint
from mmlvit.utils.logs import hide_frozen_teacher_notes

from ..lora import add_adapters
from .recorder import AttentionRecording, attention_modules, check_recordable
from .student_state import TEACHER, keep_student_only
from .teacher import NO_TEACHER, load_teacher_weights

__all__ = ['AttentionDistiller', 'load_teacher_weights']


def _scaled(loss, scale):
    """A task loss times ``scale``: a tensor, or a list of tensors (a
    detector's per-level losses)."""
    if isinstance(loss, (list, tuple)):
        return [scale * item for item in loss]
    return scale * loss


@MODELS.register_module()
class AttentionDistiller(BaseModel):
    """Train a student classifier with block-wise distillation from a frozen
    softmax teacher (Qin et al. 2026, "distill what differs").

    Each training step runs the teacher (eval mode, no grad) and the student
    on the same preprocessed batch, records every block's attention-module
    output (``backbone.layers.{i}.attn``) with forward hooks, and returns

    - the student's own losses (a bare ``loss`` renamed ``loss_task``),
    - ``loss_distill``: the sum of the distillation losses, each already
      weighted (the default is ``AttentionOutputMSE``: lambda =
      ``PAPER_DISTILL_WEIGHT`` (50) x the mean over blocks of the
      attention-output MSE),
    - per-block values (e.g. ``attn_out_mse.3``), logged but not summed.

    ``predict`` and ``tensor`` modes are the student's. The teacher never
    trains: its parameters are frozen, it stays in eval mode (no dropout or
    drop path) and it is never saved. ``state_dict()`` holds the student
    alone under plain ImageClassifier keys, so every checkpoint (and EMA
    state) is a student checkpoint that mmpretrain loads as it is;
    ``load_state_dict`` accepts such a state dict (resume), and the teacher
    keeps the weights of ``teacher_checkpoint``.

    The teacher's file is read once, into ``softmax_checkpoint`` (a
    :class:`mmlvit.transfer.SoftmaxCheckpoint`), which the run's
    ``SoftmaxToLinearInitHook`` copies the student's init from.

    Args:
        student (dict | nn.Module): The student classifier, e.g. an
            ImageClassifier with a LinearVisionTransformer. Its data
            preprocessor (normalisation, Mixup/CutMix from its
            ``train_cfg``) serves both models.
        teacher (dict): The softmax teacher classifier, with the same depth
            and width as the student. Its own data preprocessor is unused.
        teacher_checkpoint (str | SoftmaxCheckpoint | None): The teacher's
            weights: any file ``mmlvit.transfer.load_softmax_checkpoint``
            reads. Without it the distiller only predicts (its student, as
            tests and the inferencer need); training stops with the fix.
        distill_losses (list[dict]): Distillation losses (MODELS configs of
            ``DistillLoss`` subclasses). Defaults to
            ``[dict(type='AttentionOutputMSE')]``.
        data_preprocessor (dict, optional): Given by the Runner from the
            config's top-level ``data_preprocessor``; becomes the student's
            unless the student config sets its own (used only when
            ``student`` is a config).
        init_cfg (dict, optional): mmengine init config.
        adapters (dict, optional): Low-rank adapters on the student's
            linear layers, added when the distiller is built (so the
            optimizer holds them): the keyword arguments of
            :func:`mmlvit.models.lora.add_adapters`, e.g.
            ``dict(rank=4, alpha=4, targets=['attn.qkv', 'attn.proj'])``.
            ``ConversionStagesHook`` decides which stages train them and
            saves checkpoints with them merged. Defaults to None (none).

    Attributes:
        softmax_checkpoint (SoftmaxCheckpoint): The teacher's checkpoint.
        distill_scale (float): Multiplies ``loss_distill``; 1 unless a
            schedule hook (``DistillLossDecayHook``) changes it.
        task_scale (float): Multiplies the student's own losses; 1 unless
            a hook (``ConversionStagesHook``) turns them off.
    """

    def __init__(
        self,
        student: dict | nn.Module,
        teacher: dict,
        teacher_checkpoint: str | SoftmaxCheckpoint,
        distill_losses: list[dict] = (dict(type='AttentionOutputMSE'),),
        data_preprocessor: dict | None = None,
        init_cfg: dict | None = None,
        adapters: dict | None = None,
    ) -> None:
        if isinstance(student, dict):
            student = dict(student)
            if data_preprocessor is not None:
                student.setdefault(
                    'data_preprocessor', copy.deepcopy(data_preprocessor)
                )
            student = MODELS.build(student)
        super().__init__(
            data_preprocessor=student.data_preprocessor, init_cfg=init_cfg
        )
        self.student = student
        if adapters is not None:
            add_adapters(self.student, **adapters)
        self.teacher = self.build_teacher(teacher)
        # Without a checkpoint only the student runs (tests, inference).
        self._softmax_checkpoint = (
            load_teacher_weights(self.teacher, teacher_checkpoint)
            if teacher_checkpoint
            else None
        )
        self.teacher.requires_grad_(False)
        # The optimizer constructor would warn once per teacher tensor.
        hide_frozen_teacher_notes(TEACHER)
        self.teacher.eval()
        self.teacher.is_init = True  # init_weights() must not reset it
        if not distill_losses:
            raise ValueError(
                'AttentionDistiller needs at least one distillation loss.'
            )
        # Losses are registered in mmpretrain's MODELS: build them there
        # whatever scope the caller runs in (an mmseg or mmdet config).
        with MODELS.switch_scope_and_registry('mmpretrain') as registry:
            self.distill_losses = nn.ModuleList(
                registry.build(cfg) for cfg in distill_losses
            )
        self.distill_scale = 1.0
        self.task_scale = 1.0

        student_attns = attention_modules(self.student, 'student')
        teacher_attns = attention_modules(self.teacher, 'teacher')
        self._check_shapes(student_attns, teacher_attns)
        depth = len(student_attns)
        self.blocks = sorted(
            {
                i
                for loss in self.distill_losses
                for i in loss.block_indices(depth)
            }
        )
        for loss in self.distill_losses:
            loss.check_modules(student_attns, teacher_attns)
        # What the losses declare they read (DistillLoss.records).
        self.records = tuple(
            dict.fromkeys(
                name for loss in self.distill_losses for name in loss.records
            )
        )
        for role in ('student', 'teacher'):
            check_recordable(
                getattr(self, role), self.records, self.blocks, role
            )
        keep_student_only(self)

    @property
    def softmax_checkpoint(self) -> SoftmaxCheckpoint:
        """The teacher's checkpoint, read when the distiller was built.

        Raises:
            ValueError: The distiller was built without one.
        """
        self._require_teacher()
        return self._softmax_checkpoint

    def init_weights(self) -> None:
        """Check for the teacher's weights (a Runner's training starts
        here), then initialise the student."""
        self._require_teacher()
        super().init_weights()

    def _require_teacher(self) -> None:
        if self._softmax_checkpoint is None:
            raise ValueError(NO_TEACHER)

    def build_teacher(self, cfg: dict) -> nn.Module:
        """The frozen softmax teacher, built from its config (a classifier
        here; a sibling may build another model whose blocks sit at
        ``backbone.layers.{i}``)."""
        return MODELS.build(cfg)

    @staticmethod
    def _check_shapes(student_attns, teacher_attns):
        if len(student_attns) != len(teacher_attns):
            raise ValueError(
                f'The student has {len(student_attns)} blocks and the '
                f'teacher {len(teacher_attns)}: block-wise distillation '
                'needs the same depth.'
            )
        for i, (s, t) in enumerate(zip(student_attns, teacher_attns)):
            s_dims = getattr(s, 'embed_dims', None)
            t_dims = getattr(t, 'embed_dims', None)
            if s_dims != t_dims:
                raise ValueError(
                    f'Block {i}: the student attention is {s_dims} wide and '
                    f'the teacher attention {t_dims}: block-wise '
                    'distillation needs the same width.'
                )

    def train(self, mode: bool = True) -> 'AttentionDistiller':
        """Set the student's mode; the teacher always stays in eval mode."""
        super().train(mode)
        self.teacher.eval()
        return self

    def forward(
        self,
        inputs: torch.Tensor,
        data_samples: list | None = None,
        mode: str = 'tensor',
    ) -> dict | list | torch.Tensor:
        """``loss``: distillation losses; ``predict``/``tensor``: the
        student's.

        Args:
            inputs (Tensor): (B, C_in, H, W) preprocessed images.
            data_samples (list[DataSample], optional): Targets.
            mode (str): 'loss', 'predict' or 'tensor'.
        """
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        return self.student(inputs, data_samples, mode=mode)

    def loss(
        self, inputs: torch.Tensor, data_samples: list
    ) -> dict[str, torch.Tensor]:
        """Student task losses plus the distillation losses.

        Args:
            inputs (Tensor): (B, C_in, H, W) preprocessed images (the same
                batch for teacher and student).
            data_samples (list[DataSample]): Targets.

        Returns:
            dict[str, Tensor]: ``loss_task`` (and the student's other
            entries), ``loss_distill`` and the losses' log entries.
        """
        self._require_teacher()
        record = dict(blocks=self.blocks, records=self.records)
        with (
            torch.no_grad(),
            AttentionRecording(
                self.teacher, role='teacher', **record
            ) as teacher,
        ):
            self.teacher(inputs, mode='tensor')
        with AttentionRecording(
            self.student, role='student', **record
        ) as student:
            task_losses = self.student.loss(inputs, data_samples)

        losses = {
            ('loss_task' if k == 'loss' else k): (
                _scaled(v, self.task_scale) if 'loss' in k else v
            )
            for k, v in task_losses.items()
        }
        distill = 0.0
        for loss in self.distill_losses:
            value, logs = loss(student, teacher)
            distill = distill + value
            losses.update(logs)
        losses['loss_distill'] = self.distill_scale * distill
        return losses
