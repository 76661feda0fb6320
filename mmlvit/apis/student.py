"""A linear student initialised offline, as a training run would do it.

:func:`init_student` builds a config's model, runs mmengine's
``init_weights`` seeded as the runner seeds it and applies the init setting
with :func:`mmlvit.transfer.initialise`, which ``SoftmaxToLinearInitHook``
runs in ``before_train``;
:func:`save_student` writes the student as an ordinary mmpretrain
classifier checkpoint (``backbone.*``, ``head.*``).
"""

import argparse
import os
import os.path as osp

import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import set_random_seed
from mmpretrain.registry import MODELS

from mmlvit.transfer import (
    FORMATS,
    CopyReport,
    SoftmaxCheckpoint,
    initialise,
    setting_names,
)
from mmlvit.utils.logs import INIT_DUMP, drop_messages
from mmlvit.utils.model import find_student


def fill_teacher_checkpoint(cfg: Config, checkpoint: str) -> bool:
    """Give a distiller config the softmax file it leaves unset.

    A distillation config names the teacher's weights in
    ``model.teacher_checkpoint``; the shipped ones leave it None. The file
    the student is initialised from is that teacher's.

    Args:
        cfg (Config): Changed in place.
        checkpoint (str): The softmax checkpoint.

    Returns:
        bool: Whether ``model.teacher_checkpoint`` was filled.
    """
    model = cfg.get('model') or {}
    if 'teacher_checkpoint' in model and not model['teacher_checkpoint']:
        model['teacher_checkpoint'] = str(checkpoint)
        return True
    return False


def init_student(
    cfg: Config,
    checkpoint: str | SoftmaxCheckpoint,
    setting: str = 'MLPCopy',
    components: list[str] | None = None,
    format: str = 'auto',
    seed: int | None = None,
) -> tuple[nn.Module, CopyReport, int]:
    """Build ``cfg.model`` and initialise its student from ``checkpoint``.

    Args:
        cfg (Config): A classifier or distiller config, changed in place:
            a distiller's unset ``model.teacher_checkpoint`` is filled with
            ``checkpoint`` (:func:`fill_teacher_checkpoint`), and one that
            names the same file becomes the :class:`SoftmaxCheckpoint` read
            here, so that the teacher does not read it again.
        checkpoint (str | SoftmaxCheckpoint): Softmax checkpoint, any
            format of :func:`mmlvit.transfer.load_softmax_checkpoint`
            (a :class:`SoftmaxCheckpoint` already read is not read again).
        setting (str): Init setting (``SETTINGS``).
        components (list[str], optional): Copy these components instead.
        format (str): Checkpoint layout, or 'auto'.
        seed (int, optional): Seed of the fresh init. Defaults to the
            config's ``randomness.seed``, else 0.

    Returns:
        tuple: (student nn.Module, CopyReport, seed used).
    """
    source = checkpoint
    if not isinstance(source, SoftmaxCheckpoint):
        source = SoftmaxCheckpoint(checkpoint, format)
    fill_teacher_checkpoint(cfg, source.path)
    teacher = (cfg.get('model') or {}).get('teacher_checkpoint')
    if isinstance(teacher, str) and source.refers_to(teacher):
        # The distiller's teacher takes the weights already read.
        cfg.model.teacher_checkpoint = source
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    if seed is None:
        seed = (cfg.get('randomness') or {}).get('seed') or 0
    set_random_seed(seed)
    model = MODELS.build(cfg.model)
    # Outside a runner mmengine prints each tensor's init (about 1,400
    # lines for a ViT): the copy table says what matters.
    with drop_messages(INIT_DUMP):
        model.init_weights()
    report = initialise(model, source, setting, components)
    return find_student(model), report, seed


def save_student(student: nn.Module, path: str, meta: dict) -> None:
    """Save ``student`` as ``{'state_dict': ..., 'meta': meta}`` (.pth),
    creating the folder."""
    if osp.dirname(path):
        os.makedirs(osp.dirname(path), exist_ok=True)
    torch.save(dict(state_dict=student.state_dict(), meta=meta), path)


def add_init_arguments(parser: argparse.ArgumentParser) -> None:
    """The init options the command-line tools share: ``--setting``,
    ``--format`` (of the softmax file) and ``--seed``."""
    parser.add_argument(
        '--setting',
        default='MLPCopy',
        choices=setting_names(),
        help='init setting (default: MLPCopy)',
    )
    parser.add_argument(
        '--format',
        default='auto',
        choices=FORMATS,
        help='layout of the checkpoint (default: detect it)',
    )
    parser.add_argument(
        '--seed',
        type=int,
        help="seed of the student's fresh parameters (default: the "
        "config's randomness.seed, else 0)",
    )
