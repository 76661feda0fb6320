"""The frozen softmax teacher's weights: read once, checked against the
teacher config, loaded."""

import logging
import re

import torch.nn as nn
from mmengine.logging import print_log

from mmlvit.checkpoint import CheckpointError, first_few, shape_text
from mmlvit.transfer import SoftmaxCheckpoint, backbone_img_size

_BLOCK = re.compile(r'backbone\.layers\.(\d+)\.')
NO_TEACHER = (
    "AttentionDistiller needs the frozen softmax teacher's weights to "
    'train, but model.teacher_checkpoint is not set: pass --cfg-options '
    'model.teacher_checkpoint=PATH (an mmpretrain, timm, DeiT, DeiT III, '
    'distilled DeiT, CLIP, SigLIP, DINOv2, EVA-02, MAE, DINO, MoCo v3 or iBOT '
    'checkpoint). '
    'Testing and inference need no teacher.'
)


def load_teacher_weights(
    teacher: nn.Module, checkpoint: str | SoftmaxCheckpoint | None
) -> SoftmaxCheckpoint:
    """Load a softmax checkpoint (mmpretrain, timm, DeiT, MAE, ... files,
    read by ``mmlvit.transfer.load_softmax_checkpoint``) into the teacher.

    The file must hold the teacher's architecture: every teacher parameter
    comes from it with the same shape, and it has no blocks beyond the
    teacher's depth. Keys of other parts the teacher lacks (e.g. a head it
    was built without) are skipped with a warning.

    Args:
        teacher (nn.Module): The softmax teacher (a classifier, or a bare
            backbone under ``backbone``).
        checkpoint (str | SoftmaxCheckpoint): Its file, or the run's
            checkpoint object (read now if not yet read).

    Returns:
        SoftmaxCheckpoint: The checkpoint object (the one given, or one
        made for the path), its weights kept for the run's other readers.

    Raises:
        CheckpointError: The file's depth or shapes differ from the teacher
            config's, or it leaves teacher parameters unset.
        ValueError: No checkpoint is given.
    """
    if not checkpoint:
        raise ValueError(NO_TEACHER)
    if not isinstance(checkpoint, SoftmaxCheckpoint):
        checkpoint = SoftmaxCheckpoint(checkpoint)
    # A DINOv2 table is read at the teacher's image size.
    checkpoint.fit_img_size(backbone_img_size(teacher))
    state, name = checkpoint.state_dict, checkpoint.path
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
            f'Teacher checkpoint {name} is deeper than the teacher: '
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
            f'Teacher checkpoint {name} does not fit the teacher '
            f'config{width}. {len(shapes)} tensors have another shape: '
            f'{first_few(shapes)}. {fix}'
        )
    missing, unexpected = teacher.load_state_dict(state, strict=False)
    if missing:
        raise CheckpointError(
            f'Teacher checkpoint {name} leaves {len(missing)} teacher '
            f'parameters unset (e.g. {", ".join(missing[:5])}): it does not '
            f'match the teacher config'
            + (f' ({depth})' if found_arch[0] != own_arch[0] else '')
            + f'. {fix}'
        )
    if unexpected:
        print_log(
            f'Teacher checkpoint {name}: {len(unexpected)} keys the '
            f'teacher does not have were skipped (e.g. '
            f'{", ".join(unexpected[:5])}).',
            logger='current',
            level=logging.WARNING,
        )
    return checkpoint


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
