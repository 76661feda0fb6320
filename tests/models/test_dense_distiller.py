"""DenseAttentionDistiller: a segmentor or detector with a linear ViT
backbone distilled from a frozen softmax backbone (tiny ViTs: width 32,
depth 2, patch 8, 64 px inputs)."""

import copy

import pytest
import torch
from mmengine.config import ConfigDict
from mmengine.optim import OptimWrapper
from mmengine.registry import DefaultScope

mmseg = pytest.importorskip('mmseg')
mmdet = pytest.importorskip('mmdet')

from dense_samples import det_batch, seg_batch  # noqa: E402
from test_distiller import attention_outputs, mse64  # noqa: E402
from tiny_vit import (  # noqa: E402
    TINY_ARCH,
    build_distiller,
    classifier_cfg,
    save_classifier,
)

from mmlvit.checkpoint import CheckpointError  # noqa: E402

SIZE = 64
TEACHER_BACKBONE = dict(
    type='VisionTransformer', arch=TINY_ARCH, img_size=SIZE, patch_size=8
)


def student_backbone(operator='ReLULinearAttention'):
    return dict(
        type='mmpretrain.LinearVisionTransformer',
        arch=TINY_ARCH,
        img_size=SIZE,
        patch_size=8,
        out_indices=(0, 1),
        out_type='featmap',
        attn_cfg=dict(type=operator),
    )


def segmentor(operator='ReLULinearAttention'):
    return dict(
        type='EncoderDecoder',
        data_preprocessor=dict(
            type='SegDataPreProcessor',
            mean=[0.0] * 3,
            std=[1.0] * 3,
            size=(SIZE, SIZE),
        ),
        backbone=student_backbone(operator),
        decode_head=dict(
            type='FCNHead',
            in_channels=32,
            in_index=1,
            channels=16,
            num_convs=1,
            concat_input=False,
            num_classes=3,
            norm_cfg=dict(type='BN'),
            loss_decode=dict(type='CrossEntropyLoss', loss_weight=1.0),
        ),
        train_cfg=dict(),
        test_cfg=dict(mode='whole'),
    )


def detector():
    """A small Mask R-CNN on the two block maps through mmdet's FPN."""
    import os.path as osp

    from mmengine.config import Config

    base = Config.fromfile(
        osp.join(
            mmdet.__path__[0],
            '.mim/configs/_base_/models/mask-rcnn_r50_fpn.py',
        )
    )
    model = copy.deepcopy(base.model)
    model.data_preprocessor.update(mean=[0.0] * 3, std=[1.0] * 3)
    model.backbone = ConfigDict(student_backbone())
    model.neck = ConfigDict(
        type='FPN', in_channels=[32, 32], out_channels=16, num_outs=5
    )
    model.rpn_head.update(in_channels=16, feat_channels=16)
    roi = model.roi_head
    roi.bbox_roi_extractor.out_channels = 16
    roi.bbox_head.update(in_channels=16, fc_out_channels=32, num_classes=3)
    roi.mask_roi_extractor.out_channels = 16
    roi.mask_head.update(in_channels=16, conv_out_channels=16, num_classes=3)
    return model


@pytest.fixture(scope='module')
def teacher_ckpt(tmp_path_factory):
    """A softmax ViT classifier in mmpretrain's checkpoint format (head
    included, as a classification checkpoint has it)."""
    path = tmp_path_factory.mktemp('teacher') / 'teacher.pth'
    return save_classifier(classifier_cfg(TEACHER_BACKBONE), path)


def build(teacher_ckpt, student, scope, teacher=TEACHER_BACKBONE, **kwargs):
    with DefaultScope.overwrite_default_scope(scope):
        return build_distiller(
            teacher_ckpt,
            student,
            teacher,
            type='mmpretrain.DenseAttentionDistiller',
            **kwargs,
        )


def teacher_block_outputs(teacher_backbone, inputs):
    holder = torch.nn.Module()
    holder.backbone = teacher_backbone
    return attention_outputs(holder, inputs)


@pytest.mark.parametrize('task', ['seg', 'det'])
def test_total_loss_is_task_plus_50_mean_block_mse(teacher_ckpt, task):
    scope, student, make_batch = {
        'seg': ('mmseg', segmentor, seg_batch),
        'det': ('mmdet', detector, det_batch),
    }[task]
    distiller = build(
        teacher_ckpt,
        student(),
        scope,
        distill_losses=[dict(type='AttentionOutputMSE', loss_weight=50.0)],
    ).train()
    inputs, samples = make_batch(distiller)
    torch.manual_seed(5)  # the detector samples proposals at random
    losses = distiller(inputs, samples, mode='loss')
    total, _ = distiller.parse_losses(losses)

    with torch.no_grad():
        t_out = teacher_block_outputs(distiller.teacher.backbone, inputs)
        s_out = attention_outputs(distiller.student, inputs)
        torch.manual_seed(5)
        task_losses = distiller.student.loss(inputs, samples)
    task_total, _ = distiller.student.parse_losses(task_losses)
    block_mse = [mse64(s, t) for s, t in zip(s_out, t_out)]
    expected = task_total.double() + 50 * torch.stack(block_mse).mean()

    assert {'loss_distill', 'attn_out_mse.0', 'attn_out_mse.1'} < set(losses)
    assert set(task_losses) < set(losses)
    torch.testing.assert_close(total.double(), expected, rtol=1e-5, atol=0)
    assert min(block_mse) > 0


def test_teacher_is_the_softmax_backbone_of_the_checkpoint(teacher_ckpt):
    distiller = build(teacher_ckpt, segmentor(), 'mmseg')
    teacher = distiller.teacher
    assert teacher.head is None
    assert type(teacher.backbone).__module__.startswith('mmpretrain')
    saved = torch.load(teacher_ckpt)['state_dict']
    for key, value in teacher.state_dict().items():
        torch.testing.assert_close(value, saved[key], rtol=0, atol=0)


def test_teacher_frozen_through_optimizer_steps(teacher_ckpt):
    distiller = build(teacher_ckpt, segmentor(), 'mmseg').train()
    before = copy.deepcopy(distiller.teacher.state_dict())
    student_before = copy.deepcopy(distiller.student.state_dict())
    optim = OptimWrapper(
        torch.optim.AdamW(
            [p for p in distiller.parameters() if p.requires_grad], lr=1e-2
        )
    )
    for step in range(3):
        inputs, samples = seg_batch(distiller, seed=step)
        losses = distiller(inputs, samples, mode='loss')
        total, _ = distiller.parse_losses(losses)
        optim.update_params(total)
    assert not distiller.teacher.training
    assert all(not p.requires_grad for p in distiller.teacher.parameters())
    for key, value in distiller.teacher.state_dict().items():
        assert torch.equal(value, before[key]), key
    changed = [
        key
        for key, value in distiller.student.state_dict().items()
        if value.is_floating_point()
        and not torch.equal(value, student_before[key])
    ]
    assert any(k.startswith('backbone.layers.') for k in changed)
    assert any(k.startswith('decode_head.') for k in changed)


def test_checkpoint_holds_the_segmentor_alone(teacher_ckpt):
    distiller = build(teacher_ckpt, segmentor(), 'mmseg')
    state = distiller.state_dict()
    assert not any(k.startswith(('student.', 'teacher.')) for k in state)
    plain = distiller.student.state_dict()
    assert set(state) == set(plain)
    # It loads into the plain segmentor, and back into a distiller (resume).
    with DefaultScope.overwrite_default_scope('mmseg'):
        from mmseg.registry import MODELS as SEG_MODELS

        alone = SEG_MODELS.build(ConfigDict(segmentor()))
    alone.load_state_dict(state, strict=True)
    other = build(teacher_ckpt, segmentor(), 'mmseg')
    other.load_state_dict(state, strict=True)
    for key, value in other.student.state_dict().items():
        assert torch.equal(value, plain[key]), key


def test_predict_is_the_students(teacher_ckpt):
    distiller = build(teacher_ckpt, segmentor(), 'mmseg').eval()
    inputs, samples = seg_batch(distiller)
    with torch.no_grad():
        ours = distiller(inputs, samples, mode='predict')
        theirs = distiller.student(inputs, samples, mode='predict')
    for a, b in zip(ours, theirs):
        assert torch.equal(a.pred_sem_seg.data, b.pred_sem_seg.data)


def test_teacher_of_another_depth_is_refused(teacher_ckpt):
    deeper = dict(TEACHER_BACKBONE, arch=dict(TINY_ARCH, num_layers=3))
    with pytest.raises(CheckpointError, match='leaves .* teacher parameters'):
        build(teacher_ckpt, segmentor(), 'mmseg', teacher=deeper)


def test_logit_losses_are_refused(teacher_ckpt):
    with pytest.raises(ValueError, match='has no head'):
        build(
            teacher_ckpt,
            segmentor(),
            'mmseg',
            distill_losses=[dict(type='LogitKD')],
        )
