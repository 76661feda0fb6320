"""Fine-tuning from a trained student: a child config replaces a model
base's backbone init_cfg with a ``Pretrained`` dict, and the shipped
fine-tune example (tiny GLA student -> MNIST-5k) trains through a real
Runner from a checkpoint's backbone."""

import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmpretrain.registry import MODELS
from test_configs import ROOT

FINETUNE = 'configs/fashion_mnist/vit-tiny-p4_gla_finetune_mnist-5k.py'
# model base -> the keys from ``model`` down to the classifier
MODEL_BASES = {
    'configs/_base_/models/vit-tiny-p4_28px.py': (),
    'configs/_base_/models/lvit/vit-tiny-p4_28px.py': (),
    'configs/_base_/models/lvit/vit-tiny-p4_28px_distill.py': ('student',),
    'configs/_base_/models/lvit/deit-b.py': (),
    'configs/_base_/models/lvit/deit-s_distill.py': ('student',),
}
PRETRAINED = dict(type='Pretrained', checkpoint='x.pth', prefix='backbone.')


@pytest.mark.parametrize('base', sorted(MODEL_BASES))
def test_child_replaces_backbone_init_cfg_with_a_dict(base, tmp_path):
    """``model.backbone.init_cfg = dict(...)`` over a model base: the
    backbone's init_cfg is that dict, nothing merged into it."""
    override = f'dict(backbone=dict(init_cfg={PRETRAINED!r}))'
    for key in reversed(MODEL_BASES[base]):
        override = f'dict({key}={override})'
    child = tmp_path / 'child.py'
    child.write_text(
        f'_base_ = [{osp.join(ROOT, base)!r}]\nmodel = {override}\n'
    )
    classifier = Config.fromfile(str(child)).model
    for key in MODEL_BASES[base]:
        classifier = classifier[key]
    assert classifier.backbone.init_cfg == PRETRAINED


def tiny_run_cfg(checkpoint, work_dir):
    """The fine-tune example on 2 + 2 MNIST-5k images: one iteration per
    epoch, two epochs (the cosine phase starts after the first)."""
    cfg = Config.fromfile(osp.join(ROOT, FINETUNE))
    cfg.model.backbone.init_cfg.checkpoint = str(checkpoint)
    cfg.work_dir = str(work_dir)
    cfg.train_dataloader.update(batch_size=2)
    cfg.train_dataloader.dataset.indices = 2
    cfg.val_dataloader.dataset.indices = 2
    cfg.test_dataloader = cfg.val_dataloader
    cfg.train_cfg.max_epochs = 2
    cfg.default_hooks.logger.interval = 1
    return cfg


def test_finetune_example_trains_from_the_students_backbone(tmp_path):
    """Two iterations from a student checkpoint whose position embedding is
    0.5 everywhere: after them (warm-up lr about 1e-6) the backbone still
    holds the checkpoint's values, and the head is the config's own."""
    init_default_scope('mmpretrain')
    student = MODELS.build(Config.fromfile(osp.join(ROOT, FINETUNE)).model)
    torch.nn.init.constant_(student.backbone.pos_embed, 0.5)
    checkpoint = tmp_path / 'student.pth'
    torch.save({'state_dict': student.state_dict()}, checkpoint)

    runner = Runner.from_cfg(tiny_run_cfg(checkpoint, tmp_path / 'work'))
    runner.train()
    assert runner.iter == 2
    pos_embed = runner.model.backbone.pos_embed
    assert torch.allclose(
        pos_embed, torch.full_like(pos_embed, 0.5), atol=1e-3
    )


def test_finetune_example_names_a_missing_student_checkpoint(tmp_path):
    missing = tmp_path / 'no_student.pth'
    runner = Runner.from_cfg(tiny_run_cfg(missing, tmp_path / 'work'))
    with pytest.raises(Exception, match='no_student.pth'):
        runner.train()
