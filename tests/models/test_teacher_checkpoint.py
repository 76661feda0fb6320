"""A teacher checkpoint of another depth or width is refused with an error
naming the file, the mismatch and the fix (not truncated silently, not a
bare torch size mismatch)."""

import copy
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS

from mmlvit.checkpoint import CheckpointError

CONFIG = 'tests/data/configs/tiny_gla_distill_fmnist.py'
FIX = (
    'Set the teacher config (and the student) to the architecture of the '
    'checkpoint, or give model.teacher_checkpoint a checkpoint of the '
    'configured teacher.'
)


@pytest.fixture(scope='module')
def model_cfg(repo_root):
    init_default_scope('mmpretrain')
    return Config.fromfile(osp.join(repo_root, CONFIG)).model


def teacher_file(model_cfg, path, **arch):
    """A softmax classifier checkpoint like the configured teacher, with
    ``arch`` changed."""
    teacher = copy.deepcopy(model_cfg.teacher)
    teacher.backbone.arch.update(arch)
    teacher.head.in_channels = teacher.backbone.arch.embed_dims
    torch.save(dict(state_dict=MODELS.build(teacher).state_dict()), path)
    return path


def build(model_cfg, checkpoint):
    return MODELS.build(dict(model_cfg, teacher_checkpoint=str(checkpoint)))


def test_deeper_teacher_checkpoint_is_refused(model_cfg, tmp_path):
    path = teacher_file(model_cfg, tmp_path / 'deep.pth', num_layers=3)
    with pytest.raises(CheckpointError) as err:
        build(model_cfg, path)
    assert str(err.value) == (
        f'Teacher checkpoint {path} is deeper than the teacher: the file '
        'holds 3 transformer blocks, the teacher config builds 2 '
        '(model.teacher.backbone.arch num_layers), so the teacher would be '
        f'silently truncated. {FIX}'
    )


def test_wider_teacher_checkpoint_is_refused(model_cfg, tmp_path):
    path = teacher_file(model_cfg, tmp_path / 'wide.pth', embed_dims=64)
    with pytest.raises(CheckpointError) as err:
        build(model_cfg, path)
    assert str(err.value).startswith(
        f'Teacher checkpoint {path} does not fit the teacher config: the '
        'checkpoint is 64 wide, the teacher config 32 (arch embed_dims). 29 '
        'tensors have another shape: backbone.cls_token (file 1x1x64, '
        'teacher 1x1x32), '
    )
    assert str(err.value).endswith(f'and 26 more. {FIX}')


def test_matching_teacher_checkpoint_loads(model_cfg, tmp_path):
    path = teacher_file(model_cfg, tmp_path / 'same.pth')
    model = build(model_cfg, path)
    expected = torch.load(path, weights_only=True)['state_dict']
    for key, value in model.teacher.state_dict().items():
        assert torch.equal(value, expected[key]), key
