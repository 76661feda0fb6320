"""AttentionDistiller: a student trained against a frozen softmax teacher."""

import copy
import logging
import re

import torch
import torch.nn as nn
from mmengine.logging import print_log
from mmengine.model import BaseModel
from mmpretrain.registry import MODELS

from mmlvit.checkpoint import CheckpointError, first_few, shape_text
from mmlvit.engine.logs import hide_frozen_teacher_notes
from mmlvit.transfer import load_softmax_checkpoint

from .recorder import AttentionRecording, attention_modules

STUDENT, TEACHER = 'student.', 'teacher.'
_BLOCK = re.compile(r'backbone\.layers\.(\d+)\.')


def load_teacher_weights(teacher, checkpoint):
    """Load a softmax checkpoint (mmpretrain, timm, DeiT, MAE, ... files,
    read by ``mmlvit.transfer.load_softmax_checkpoint``) into the teacher.

    The file must hold the teacher's architecture: every teacher parameter
    comes from it with the same shape, and it has no blocks beyond the
    teacher's depth. Keys of other parts the teacher lacks (e.g. a head it
    was built without) are skipped with a warning.

    Raises:
        CheckpointError: The file's depth or shapes differ from the teacher
            config's, or it leaves teacher parameters unset.
        ValueError: No checkpoint is given.
    """
    if not checkpoint:
        raise ValueError(
            "AttentionDistiller needs the frozen softmax teacher's weights, "
            'but model.teacher_checkpoint is not set: pass --cfg-options '
            'model.teacher_checkpoint=PATH (an mmpretrain, timm, DeiT, MAE, '
            'DINO, MoCo v3 or iBOT checkpoint).'
        )
    state = load_softmax_checkpoint(checkpoint)
    own = teacher.state_dict()
    fix = (
        'Set the teacher config (and the student) to the architecture of '
        'the checkpoint, or give model.teacher_checkpoint a checkpoint of '
        'the configured teacher.'
    )
    found_arch, own_arch = _vit_arch(state), _vit_arch(own)
    depth = (
        f'the file holds {found_arch[0]} transformer blocks, the teacher '
        f'config builds {own_arch[0]} (model.teacher.backbone.arch '
        'num_layers)'
    )
    if found_arch[0] > own_arch[0]:
        raise CheckpointError(
            f'Teacher checkpoint {checkpoint} is deeper than the teacher: '
            f'{depth}, so the teacher would be silently truncated. {fix}'
        )
    shapes = [
        f'{k} (file {shape_text(state[k].shape)}, teacher '
        f'{shape_text(v.shape)})'
        for k, v in own.items()
        if k in state and state[k].shape != v.shape
    ]
    if shapes:
        width = ''
        if found_arch[1] != own_arch[1]:
            width = (
                f': the checkpoint is {found_arch[1]} wide, the teacher '
                f'config {own_arch[1]} (arch embed_dims)'
            )
        raise CheckpointError(
            f'Teacher checkpoint {checkpoint} does not fit the teacher '
            f'config{width}. {len(shapes)} tensors have another shape: '
            f'{first_few(shapes)}. {fix}'
        )
    missing, unexpected = teacher.load_state_dict(state, strict=False)
    if missing:
        raise CheckpointError(
            f'Teacher checkpoint {checkpoint} leaves {len(missing)} teacher '
            f'parameters unset (e.g. {", ".join(missing[:5])}): it does not '
            f'match the teacher config'
            + (f' ({depth})' if found_arch[0] != own_arch[0] else '')
            + f'. {fix}'
        )
    if unexpected:
        print_log(
            f'Teacher checkpoint {checkpoint}: {len(unexpected)} keys the '
            f'teacher does not have were skipped (e.g. '
            f'{", ".join(unexpected[:5])}).',
            logger='current',
            level=logging.WARNING,
        )


def _vit_arch(state):
    """(blocks, width) of a ViT classifier state dict in mmpretrain keys;
    width is None when no patch embedding is found."""
    blocks = {
        int(match.group(1))
        for match in map(_BLOCK.match, state)
        if match is not None
    }
    embed = state.get('backbone.patch_embed.projection.weight')
    return len(blocks), None if embed is None else embed.shape[0]


def _student_key(key, prefix):
    """The plain-classifier name of a distiller state key, or None.

    ``prefix + 'student.x'`` -> ``prefix + 'x'`` and (metadata)
    ``prefix + 'student'`` -> ``prefix[:-1]``; any other key of the
    distiller (teacher, losses, shared preprocessor) -> None.
    """
    if key == prefix + STUDENT[:-1]:
        return prefix[:-1]
    if key.startswith(prefix + STUDENT):
        return prefix + key[len(prefix + STUDENT) :]
    return None


def _save_student_only(module, state_dict, prefix, local_metadata):
    """state_dict post-hook: keep the student alone, without its prefix.

    The result is an ordinary ImageClassifier state dict (``backbone.*``,
    ``head.*``), also inside wrappers (the EMA model's ``module.*``).
    """
    tables = [state_dict]
    if getattr(state_dict, '_metadata', None) is not None:
        tables.append(state_dict._metadata)
    for table in tables:
        own = [
            (k, table.pop(k))
            for k in list(table)
            if k == prefix[:-1] or k.startswith(prefix)
        ]
        for key, value in own:
            new_key = _student_key(key, prefix)
            if new_key is not None:
                table[new_key] = value


def _load_student_only(
    module,
    state_dict,
    prefix,
    local_metadata,
    strict,
    missing_keys,
    unexpected_keys,
    error_msgs,
):
    """load_state_dict pre-hook: accept a student-only (plain classifier)
    state dict, as written by :func:`_save_student_only`; the teacher keeps
    its weights. A state dict with ``student.*`` keys loads unchanged."""
    own = [k for k in state_dict if k.startswith(prefix)]
    if any(k.startswith((prefix + STUDENT, prefix + TEACHER)) for k in own):
        return
    for key in own:
        state_dict[prefix + STUDENT + key[len(prefix) :]] = state_dict.pop(key)
    for key, value in module.teacher.state_dict().items():
        state_dict[prefix + TEACHER + key] = value


@MODELS.register_module()
class AttentionDistiller(BaseModel):
    """Train a student classifier with block-wise distillation from a frozen
    softmax teacher (Qin et al. 2026, "distill what differs").

    Each training step runs the teacher (eval mode, no grad) and the student
    on the same preprocessed batch, records every block's attention-module
    output (``backbone.layers.{i}.attn``) with forward hooks, and returns

    - the student's own losses (a bare ``loss`` renamed ``loss_task``),
    - ``loss_distill``: the sum of the distillation losses, each already
      weighted (the default is ``AttentionOutputMSE``: 50 x the mean over
      blocks of the attention-output MSE),
    - per-block values (e.g. ``attn_out_mse.3``), logged but not summed.

    ``predict`` and ``tensor`` modes are the student's. The teacher never
    trains: its parameters are frozen, it stays in eval mode (no dropout or
    drop path) and it is never saved. ``state_dict()`` holds the student
    alone under plain ImageClassifier keys, so every checkpoint (and EMA
    state) is a student checkpoint that mmpretrain loads as it is;
    ``load_state_dict`` accepts such a state dict (resume), and the teacher
    keeps the weights of ``teacher_checkpoint``.

    Args:
        student (dict | nn.Module): The student classifier, e.g. an
            ImageClassifier with a LinearVisionTransformer. Its data
            preprocessor (normalisation, Mixup/CutMix from its
            ``train_cfg``) serves both models.
        teacher (dict): The softmax teacher classifier, with the same depth
            and width as the student. Its own data preprocessor is unused.
        teacher_checkpoint (str): The teacher's weights: any file
            ``mmlvit.transfer.load_softmax_checkpoint`` reads.
        distill_losses (list[dict]): Distillation losses (MODELS configs of
            ``DistillLoss`` subclasses). Defaults to
            ``[dict(type='AttentionOutputMSE')]``.
        data_preprocessor (dict, optional): Given by the Runner from the
            config's top-level ``data_preprocessor``; becomes the student's
            unless the student config sets its own (used only when
            ``student`` is a config).
        init_cfg (dict, optional): mmengine init config.

    Attributes:
        distill_scale (float): Multiplies ``loss_distill``; 1 unless a
            schedule hook (``DistillLossDecayHook``) changes it.
    """

    def __init__(
        self,
        student,
        teacher,
        teacher_checkpoint,
        distill_losses=(dict(type='AttentionOutputMSE'),),
        data_preprocessor=None,
        init_cfg=None,
    ):
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
        self.teacher = self.build_teacher(teacher)
        self.teacher_checkpoint = teacher_checkpoint
        load_teacher_weights(self.teacher, teacher_checkpoint)
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
        self.record_inputs = any(
            loss.needs_inputs for loss in self.distill_losses
        )
        self.record_logits = any(
            loss.needs_logits for loss in self.distill_losses
        )
        for role in ('student', 'teacher'):
            if (
                self.record_logits
                and getattr(getattr(self, role), 'head', None) is None
            ):
                raise ValueError(
                    f'The {role} has no head, but a distillation loss '
                    'compares logits.'
                )

        self.register_state_dict_post_hook(_save_student_only)
        self.register_load_state_dict_pre_hook(_load_student_only)

    def build_teacher(self, cfg):
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

    def train(self, mode=True):
        """Set the student's mode; the teacher always stays in eval mode."""
        super().train(mode)
        self.teacher.eval()
        return self

    def forward(self, inputs, data_samples=None, mode='tensor'):
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

    def loss(self, inputs, data_samples):
        """Student task losses plus the distillation losses.

        Args:
            inputs (Tensor): (B, C_in, H, W) preprocessed images (the same
                batch for teacher and student).
            data_samples (list[DataSample]): Targets.

        Returns:
            dict[str, Tensor]: ``loss_task`` (and the student's other
            entries), ``loss_distill`` and the losses' log entries.
        """
        record = dict(
            blocks=self.blocks,
            inputs=self.record_inputs,
            logits=self.record_logits,
        )
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
            ('loss_task' if k == 'loss' else k): v
            for k, v in task_losses.items()
        }
        distill = 0.0
        for loss in self.distill_losses:
            value, logs = loss(student, teacher)
            distill = distill + value
            losses.update(logs)
        losses['loss_distill'] = self.distill_scale * distill
        return losses
