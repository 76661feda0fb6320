"""Conversion diagnostics on tiny teacher/student pairs: zero error for a
student that is its teacher, large error for a Random student, errors that
fall under distillation; the CLI on real validation batches."""

import copy
import csv
import json
import math
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import OptimWrapper
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

from mmlvit.diagnostics import (
    ArchitectureMismatch,
    diagnose_conversion,
    map_total_variation,
)
from mmlvit.transfer import COMPONENTS, apply_init

CONFIG = 'tests/data/configs/tiny_gla_distill_fmnist.py'


@pytest.fixture(scope='module')
def cfg(repo_root):
    init_default_scope('mmpretrain')
    return Config.fromfile(osp.join(repo_root, CONFIG))


def build(model_cfg, attn_cfg=None, seed=0):
    model_cfg = copy.deepcopy(model_cfg)
    if attn_cfg is not None:
        model_cfg.backbone.attn_cfg = attn_cfg
    torch.manual_seed(seed)
    model = MODELS.build(model_cfg)
    model.init_weights()
    return model


@pytest.fixture(scope='module')
def teacher(cfg):
    """The tiny softmax teacher with PyTorch's default Linear init (outputs
    of a trained ViT's scale)."""
    torch.manual_seed(0)
    return MODELS.build(cfg.model.teacher).eval()


@pytest.fixture(scope='module')
def images():
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(8, 1, 28, 28, generator=generator) for _ in range(2)]


def linear_copy_of(teacher, student_cfg, operator, setting, components=None):
    """A LinearVisionTransformer as deep and wide as the teacher."""
    student_cfg = copy.deepcopy(student_cfg)
    student_cfg.backbone.arch = dict(
        embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64
    )
    student_cfg.backbone.patch_size = 7
    student = build(student_cfg, operator and dict(type=operator))
    apply_init(student, teacher.state_dict(), setting, components)
    return student


def test_student_that_is_its_teacher_has_zero_error(cfg, teacher, images):
    student = linear_copy_of(  # FullCopy and the head
        teacher, cfg.model.student, 'SoftmaxAttention', 'FullCopy', COMPONENTS
    )
    diagnosis = diagnose_conversion(teacher, student, images)
    for row in diagnosis.blocks:
        assert row['operator'] == 'softmax'
        assert row['attn_rel_err'] < 1e-5
        assert row['attn_rel_err_local'] < 1e-5
        assert row['block_cos'] > 1 - 1e-5
        assert row['map_tv'] < 1e-5
    assert diagnosis.final['feature_rel_err'] < 1e-5
    assert diagnosis.final['top1_agreement'] == 1.0
    assert diagnosis.final['images'] == 16


def test_random_student_has_large_error(cfg, teacher, images):
    student = linear_copy_of(
        teacher, cfg.model.student, 'ReLULinearAttention', 'Random'
    )
    diagnosis = diagnose_conversion(teacher, student, images)
    for row in diagnosis.blocks:
        assert row['operator'] == 'relu'
        assert row['attn_rel_err'] > 0.5
        assert row['attn_rel_err_local'] > 0.5
        assert row['map_tv'] > 0.1  # ReLU attention forms a map
    gla = linear_copy_of(
        teacher, cfg.model.student, 'GatedLinearAttention', 'Random'
    )
    no_maps = diagnose_conversion(teacher, gla, images, maps=False)
    assert all(math.isnan(row['map_tv']) for row in no_maps.blocks)


def test_map_tv_is_total_variation_on_l1_unit_rows():
    softmax = torch.softmax(torch.randn(3, 5, 5), -1)
    tv = map_total_variation(softmax, softmax.roll(1, -1))
    # Probability rows: the usual total-variation distance.
    assert torch.allclose(
        tv, 0.5 * (softmax - softmax.roll(1, -1)).abs().sum(-1)
    )
    # The same row up to a positive factor: 0.
    assert map_total_variation(7.0 * softmax, softmax).abs().max() < 1e-6
    # Disjoint supports and opposite signs: 1.
    one_hot = torch.eye(4)
    assert torch.allclose(
        map_total_variation(one_hot, one_hot.roll(1, -1)), torch.ones(4)
    )
    signed = torch.randn(4, 6, 6)
    assert torch.allclose(
        map_total_variation(signed, -3.0 * signed), torch.ones(4, 6)
    )
    # Signed, unnormalised rows (GLA-like) never leave [0, 1].
    generator = torch.Generator().manual_seed(0)
    for scale in (0.1, 1.0, 30.0):
        rows = scale * torch.randn(64, 9, 9, generator=generator)
        tv = map_total_variation(rows, torch.softmax(rows.flip(0), -1))
        assert tv.min() >= 0 and tv.max() <= 1 + 1e-6


def test_gla_map_tv_lies_in_zero_one(cfg, teacher, images):
    """GLA's map (decayed, unnormalised q.k products, of either sign)
    against the softmax teacher's, for a Random and an MLPCopy student, the
    latter with queries and keys 10x larger (absolute row sums of about
    6: without the row scaling, 0.5 * sum_j |A_s - A_t| is about 3.6)."""
    for setting in ('Random', 'MLPCopy'):
        gla = linear_copy_of(
            teacher, cfg.model.student, 'GatedLinearAttention', setting
        )
        if setting == 'MLPCopy':
            with torch.no_grad():
                for layer in gla.backbone.layers:
                    layer.attn.qkv.weight[:64].mul_(10.0)
        diagnosis = diagnose_conversion(teacher, gla, images)
        for row in diagnosis.blocks:
            assert row['operator'] == 'gla'
            assert 0.05 < row['map_tv'] <= 1 + 1e-6, (setting, row)


def test_local_error_isolates_the_block(cfg, teacher, images):
    """Block 1 is the teacher's softmax block, block 0 is not: block 1's
    error in the student's own stream comes from block 0 only, so its
    local error (on the teacher's input) is zero."""
    student_cfg = copy.deepcopy(cfg.model.student)
    student_cfg.backbone.attn_cfg = [
        dict(type='ReLULinearAttention'),
        dict(type='SoftmaxAttention'),
    ]
    student = linear_copy_of(teacher, student_cfg, None, 'FullCopy')
    first, second = diagnose_conversion(teacher, student, images).blocks
    assert (first['operator'], second['operator']) == ('relu', 'softmax')
    assert first['attn_rel_err_local'] > 0.05
    assert second['attn_rel_err'] > 0.05
    assert second['attn_rel_err_local'] < 1e-5


def test_errors_fall_under_attention_distillation(
    cfg, teacher, images, tmp_path
):
    path = tmp_path / 'teacher.pth'
    torch.save(dict(state_dict=teacher.state_dict()), path)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.teacher_checkpoint = str(path)
    model_cfg.student.data_preprocessor = dict(num_classes=10)
    torch.manual_seed(0)
    distiller = MODELS.build(model_cfg)
    apply_init(distiller.student, teacher.state_dict(), 'MLPCopy')
    before = diagnose_conversion(distiller.teacher, distiller.student, images)
    optim = OptimWrapper(
        torch.optim.AdamW(distiller.student.parameters(), lr=1e-2)
    )
    samples = [DataSample().set_gt_label(i % 10) for i in range(8)]
    for step in range(12):
        distiller.train()
        distiller.train_step(
            dict(inputs=images[step % 2], data_samples=samples), optim
        )
    after = diagnose_conversion(distiller.teacher, distiller.student, images)
    for b, a in zip(before.blocks, after.blocks):
        assert a['attn_rel_err'] < 0.8 * b['attn_rel_err'], (b, a)


def test_depth_mismatch_is_named(cfg, teacher):
    student_cfg = copy.deepcopy(cfg.model.student)
    student_cfg.backbone.arch.num_layers = 3
    with pytest.raises(
        ArchitectureMismatch, match='teacher has 2 blocks and the student 3'
    ):
        diagnose_conversion(
            teacher, build(student_cfg), [torch.zeros(1, 1, 28, 28)]
        )


def test_cli_on_validation_batches(
    teacher, tmp_path, fashion_mnist_root, capsys, load_tool
):
    path = tmp_path / 'teacher.pth'
    torch.save(dict(state_dict=teacher.state_dict()), path)
    out_dir = tmp_path / 'diag'
    tool = load_tool('tools/analysis/diagnose_conversion.py')
    diagnosis = tool.main(
        [CONFIG, str(path), '--batches', '2', '--batch-size', '16']
        + ['--out-dir', str(out_dir), '--setting', 'MLPCopy']
    )
    printed = capsys.readouterr().out
    assert 'block  operator  attn_rel_err  attn_rel_err_local' in printed
    assert 'top-1 agreement with the teacher' in printed
    assert '(32 images)' in printed
    with open(out_dir / 'diagnosis.csv') as file:
        rows = list(csv.DictReader(file))
    assert [r['block'] for r in rows] == ['0', '1']
    assert float(rows[0]['attn_rel_err']) == pytest.approx(
        diagnosis.blocks[0]['attn_rel_err']
    )
    assert json.loads((out_dir / 'final.json').read_text())['images'] == 32
    assert (out_dir / 'diagnosis.png').stat().st_size > 10_000

    # A plain student config needs the teacher's config.
    with pytest.raises(SystemExit, match='--teacher-config'):
        tool.main(['tests/data/configs/tiny_softmax_fmnist.py', str(path)])
