"""AttentionDistiller's checkpoints and refusals: the student alone under
plain classifier keys (also in the EMA state), resumable into a distiller
whose teacher keeps its weights; the teacher's own file in mmpretrain or
timm layout, refused when it does not cover the teacher; models and losses
that cannot be distilled block by block are refused at build time."""

import copy

import pytest
import test_distiller as distiller_tests
import torch
from mmengine.model import ExponentialMovingAverage
from mmengine.runner import load_checkpoint
from mmpretrain.registry import MODELS
from test_distiller import STUDENT, TEACHER, batch, build
from tiny_vit import NO_CLS, TINY_ARCH, backbone_cfg, classifier_cfg

from mmlvit.checkpoint import CheckpointError
from mmlvit.transfer.source import softmax_checkpoint_of

teacher_ckpt = distiller_tests.teacher_ckpt


def test_checkpoint_holds_the_student_alone(teacher_ckpt, tmp_path):
    distiller = build(teacher_ckpt)
    state = distiller.state_dict()
    assert not any(k.startswith(('teacher.', 'student.')) for k in state)
    assert set(state) == set(distiller.student.state_dict())
    assert '' in state._metadata and 'backbone' in state._metadata

    path = tmp_path / 'epoch_1.pth'
    torch.save(dict(state_dict=state, meta=dict()), path)
    plain = MODELS.build(STUDENT)
    load_checkpoint(plain, str(path), strict=True)
    plain.eval(), distiller.eval()
    inputs, _ = batch()
    assert torch.equal(
        plain(inputs, mode='tensor'), distiller(inputs, mode='tensor')
    )

    # Resume: a student-only state dict loads strictly into a distiller;
    # the teacher keeps the weights of its checkpoint.
    other = build(
        teacher_ckpt, distill_losses=[dict(type='AttentionOutputMSE')]
    )
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    teacher_before = copy.deepcopy(distiller.teacher.state_dict())
    other.teacher.load_state_dict(teacher_before)
    other.load_state_dict(state, strict=True)
    for key, value in other.student.state_dict().items():
        assert torch.equal(value, distiller.student.state_dict()[key])
    for key, value in other.teacher.state_dict().items():
        assert torch.equal(value, teacher_before[key])
    # A full (student. + teacher.) state dict also loads as it is.
    full = {f'student.{k}': v for k, v in state.items()}
    full.update({f'teacher.{k}': v + 1 for k, v in teacher_before.items()})
    other.load_state_dict(full, strict=True)
    key = 'backbone.layers.0.attn.qkv.weight'
    assert torch.equal(
        other.teacher.state_dict()[key], teacher_before[key] + 1
    )


def test_ema_state_holds_the_student_alone(teacher_ckpt):
    distiller = build(teacher_ckpt)
    ema = ExponentialMovingAverage(distiller)
    state = ema.state_dict()
    assert set(state) == {'steps'} | {
        f'module.{k}' for k in distiller.student.state_dict()
    }
    with torch.no_grad():
        for p in distiller.student.parameters():
            p.mul_(2.0)
    ema.update_parameters(distiller)
    ema.update_parameters(distiller)
    state = ema.state_dict()
    restored = ExponentialMovingAverage(build(teacher_ckpt))
    restored.load_state_dict(state, strict=True)
    for key, value in restored.module.student.state_dict().items():
        assert torch.equal(value, state[f'module.{key}'])


def test_teacher_checkpoint_must_cover_the_teacher(teacher_ckpt, tmp_path):
    state = torch.load(teacher_ckpt, weights_only=True)['state_dict']
    partial = {k: v for k, v in state.items() if 'layers.1.' not in k}
    path = tmp_path / 'partial.pth'
    torch.save(dict(state_dict=partial), path)
    with pytest.raises(CheckpointError, match='leaves .* parameters unset'):
        build(path)
    with pytest.raises(FileNotFoundError):
        build(tmp_path / 'absent.pth')


def to_timm(state):
    """mmpretrain ViT keys -> timm keys (the layout of timm/DeiT files)."""
    renames = [
        ('backbone.patch_embed.projection', 'patch_embed.proj'),
        ('backbone.ln1.', 'norm.'),
        ('backbone.layers.', 'blocks.'),
        ('.ln1.', '.norm1.'),
        ('.ln2.', '.norm2.'),
        ('.ffn.layers.0.0.', '.mlp.fc1.'),
        ('.ffn.layers.1.', '.mlp.fc2.'),
        ('head.layers.head.', 'head.'),
        ('backbone.', ''),
    ]
    timm = {}
    for key, value in state.items():
        for old, new in renames:
            key = key.replace(old, new)
        timm[key] = value
    return timm


def test_timm_safetensors_teacher(teacher_ckpt, tmp_path):
    from safetensors.torch import save_file

    state = torch.load(teacher_ckpt, weights_only=True)['state_dict']
    path = tmp_path / 'model.safetensors'
    save_file({k: v.contiguous() for k, v in to_timm(state).items()}, path)
    distiller = build(path)
    for key, value in distiller.teacher.state_dict().items():
        assert torch.equal(value, state[key]), key


def test_depth_mismatch_is_refused(teacher_ckpt):
    student = copy.deepcopy(STUDENT)
    student['backbone']['arch'] = dict(TINY_ARCH, num_layers=3)
    with pytest.raises(ValueError, match='3 blocks and the teacher 2'):
        build(teacher_ckpt, student=student)


def test_width_mismatch_is_refused(teacher_ckpt):
    student = copy.deepcopy(STUDENT)
    student['backbone']['arch'] = dict(TINY_ARCH, embed_dims=16)
    student['head']['in_channels'] = 16
    with pytest.raises(ValueError, match='16 wide and the teacher .* 32'):
        build(teacher_ckpt, student=student)


def test_missing_block_is_refused(teacher_ckpt):
    with pytest.raises(IndexError, match='block 2 does not exist'):
        build(
            teacher_ckpt,
            distill_losses=[dict(type='AttentionOutputMSE', blocks=[0, 2])],
        )


def test_map_loss_refuses_an_operator_without_map(teacher_ckpt):
    student = classifier_cfg(backbone_cfg('TTTAttention', **NO_CLS))
    with pytest.raises(TypeError, match='TTTAttention has no N x N'):
        build(
            teacher_ckpt,
            student=student,
            distill_losses=[dict(type='AttentionMapMSE', loss_weight=1.0)],
        )


def test_no_distillation_loss_is_refused(teacher_ckpt):
    with pytest.raises(ValueError, match='at least one distillation loss'):
        build(teacher_ckpt, distill_losses=[])


def test_logit_loss_needs_heads(teacher_ckpt):
    with pytest.raises(ValueError, match='teacher has no head'):
        build(
            teacher_ckpt,
            teacher=dict(TEACHER, head=None),
            distill_losses=[dict(type='LogitKD')],
        )


def test_backbone_without_layers_is_refused(teacher_ckpt):
    student = dict(
        type='ImageClassifier',
        backbone=dict(type='ResNet', depth=18, in_channels=1),
        head=dict(type='LinearClsHead', num_classes=10, in_channels=512),
    )
    with pytest.raises(TypeError, match='student .ResNet. cannot be'):
        build(teacher_ckpt, student=student)


def test_without_teacher_checkpoint_only_the_student_runs(teacher_ckpt):
    """Tests and the inferencer build a distill config without the
    teacher's file: the student predicts; training stops with the fix."""
    distiller = MODELS.build(
        dict(
            type='AttentionDistiller',
            student=STUDENT,
            teacher=TEACHER,
            teacher_checkpoint=None,
            data_preprocessor=distiller_tests.PREPROCESSOR,
        )
    )
    trained = build(teacher_ckpt)
    distiller.load_state_dict(trained.state_dict(), strict=True)
    distiller.eval(), trained.eval()
    inputs, samples = batch()
    assert torch.equal(
        distiller(inputs, mode='tensor'), trained(inputs, mode='tensor')
    )
    assert len(distiller(inputs, samples, mode='predict')) == len(samples)
    fix = 'model.teacher_checkpoint is not set: pass --cfg-options'
    with pytest.raises(ValueError, match=fix):
        distiller(inputs, samples, mode='loss')
    with pytest.raises(ValueError, match=fix):
        distiller.init_weights()  # where a Runner's training starts
    with pytest.raises(ValueError, match=fix):
        softmax_checkpoint_of(distiller)  # what the init hook reads
