"""AttentionDistiller: the loss it returns and the frozen teacher
(tiny ViTs: width 32, depth 2, 32 px, patch 8); its checkpoints and the
configurations it refuses are tested in test_distiller_checkpoints.py."""

import copy
import types

import numpy as np
import pytest
import torch
from mmengine.optim import OptimWrapper
from mmpretrain.registry import HOOKS
from mmpretrain.structures import DataSample
from tiny_vit import (
    NO_CLS,
    backbone_cfg,
    build_distiller,
    classifier_cfg,
    save_classifier,
)

PREPROCESSOR = dict(
    type='ClsDataPreprocessor', num_classes=10, mean=[0.5], std=[2.0]
)
TEACHER = classifier_cfg(backbone_cfg())
STUDENT = classifier_cfg(backbone_cfg('ReLULinearAttention'))


@pytest.fixture(scope='module')
def teacher_ckpt(tmp_path_factory):
    """A softmax teacher in mmpretrain's checkpoint format."""
    path = tmp_path_factory.mktemp('teacher') / 'teacher.pth'
    return save_classifier(TEACHER, path)


def build(teacher_ckpt, student=STUDENT, teacher=TEACHER, **kwargs):
    kwargs.setdefault('data_preprocessor', PREPROCESSOR)
    return build_distiller(teacher_ckpt, student, teacher, **kwargs)


def batch(size=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    inputs = torch.randn(size, 1, 32, 32, generator=gen)
    labels = torch.randint(0, 10, (size,), generator=gen)
    samples = [DataSample().set_gt_label(int(y)) for y in labels]
    return inputs, samples


def attention_outputs(classifier, inputs):
    """Every block's attention output, by walking the backbone by hand."""
    backbone = classifier.backbone
    x, hw = backbone.patch_embed(inputs)
    if backbone.cls_token is not None:
        x = torch.cat([backbone.cls_token.expand(len(x), -1, -1), x], dim=1)
    if backbone.pos_embed is not None:
        x = x + backbone.pos_embed
    else:
        x = x + backbone.position_embedding(hw)
    outputs = []
    for layer in backbone.layers:
        h = layer.ln1(x)
        if hasattr(layer, 'drop_path'):  # LinearTransformerEncoderLayer
            a = layer.attn(h, hw)
        else:
            a = layer.attn(h)
        outputs.append(a)
        x = layer.ffn(layer.ln2(x + a), identity=x + a)
    return outputs


def mse64(a, b):
    return ((a.double() - b.double()) ** 2).mean()


def test_total_loss_is_task_plus_50_mean_block_mse(teacher_ckpt):
    distiller = build(teacher_ckpt).train()
    inputs, samples = batch()
    losses = distiller(inputs, samples, mode='loss')
    total, log_vars = distiller.parse_losses(losses)

    with torch.no_grad():
        t_out = attention_outputs(distiller.teacher, inputs)
        s_out = attention_outputs(distiller.student, inputs)
        task = distiller.student.loss(inputs, samples)['loss']
    block_mse = [mse64(s, t) for s, t in zip(s_out, t_out)]
    expected = task.double() + 50 * torch.stack(block_mse).mean()

    assert set(losses) == {
        'loss_task',
        'loss_distill',
        'attn_out_mse.0',
        'attn_out_mse.1',
    }
    torch.testing.assert_close(total.double(), expected, rtol=1e-5, atol=0)
    torch.testing.assert_close(losses['loss_task'], task)
    for i, value in enumerate(block_mse):
        torch.testing.assert_close(
            losses[f'attn_out_mse.{i}'].double(), value, rtol=1e-5, atol=0
        )
    # Per-block values are logged but not summed into the total.
    torch.testing.assert_close(
        log_vars['loss'], (losses['loss_task'] + losses['loss_distill'])
    )
    assert block_mse[0] > 0 and block_mse[1] > 0


def test_teacher_frozen_through_optimizer_steps(teacher_ckpt):
    teacher = copy.deepcopy(TEACHER)
    teacher['backbone'].update(drop_rate=0.3, drop_path_rate=0.3)
    distiller = build(teacher_ckpt, teacher=teacher).train()
    before_t = copy.deepcopy(distiller.teacher.state_dict())
    before_s = copy.deepcopy(distiller.student.state_dict())
    optim = OptimWrapper(
        torch.optim.AdamW(distiller.parameters(), lr=1e-2, weight_decay=0.05)
    )
    inputs, samples = batch()
    for _ in range(3):
        log_vars = distiller.train_step(
            dict(inputs=list(inputs * 2 + 0.5), data_samples=samples), optim
        )
    assert torch.isfinite(log_vars['loss'])
    assert distiller.training and distiller.student.training
    assert not any(m.training for m in distiller.teacher.modules())
    for key, value in distiller.teacher.state_dict().items():
        assert torch.equal(value, before_t[key]), key
    assert all(
        p.grad is None and not p.requires_grad
        for p in distiller.teacher.parameters()
    )
    assert any(
        not torch.equal(v, before_s[k])
        for k, v in distiller.student.state_dict().items()
    )
    # Dropout and drop path (0.3) are inactive: the teacher's recorded
    # outputs are the same on every call and equal the eval-mode ones.
    reference = attention_outputs(distiller.teacher.eval(), inputs)
    for _ in range(2):
        losses = distiller.train()(inputs, samples, mode='loss')
        s_out = attention_outputs(distiller.student, inputs)
        for i, (s, t) in enumerate(zip(s_out, reference)):
            torch.testing.assert_close(
                losses[f'attn_out_mse.{i}'], torch.mean((s - t) ** 2)
            )


def test_init_weights_keeps_the_teacher_checkpoint(teacher_ckpt):
    distiller = build(teacher_ckpt)
    saved = torch.load(teacher_ckpt, weights_only=True)['state_dict']
    for key, value in distiller.teacher.state_dict().items():
        assert torch.equal(value, saved[key]), key


def test_student_modes_and_shared_preprocessor(teacher_ckpt):
    distiller = build(teacher_ckpt).eval()
    inputs, samples = batch()
    assert distiller.data_preprocessor is distiller.student.data_preprocessor
    assert torch.equal(
        distiller(inputs, mode='tensor'),
        distiller.student(inputs, mode='tensor'),
    )
    pred = distiller(inputs, samples, mode='predict')
    ref = distiller.student(inputs, samples, mode='predict')
    assert torch.equal(
        torch.stack([p.pred_score for p in pred]),
        torch.stack([p.pred_score for p in ref]),
    )


def test_mixup_batch_is_the_same_for_teacher_and_student(teacher_ckpt):
    student = dict(
        STUDENT,
        train_cfg=dict(
            augments=[
                dict(type='Mixup', alpha=1.0),
                dict(type='CutMix', alpha=1.0),
            ]
        ),
    )
    distiller = build(teacher_ckpt, student=student).train()
    np.random.seed(0)
    torch.manual_seed(0)
    seen = {}
    for name in ('teacher', 'student'):
        getattr(distiller, name).backbone.register_forward_pre_hook(
            lambda m, args, name=name: seen.__setitem__(name, args[0])
        )
    inputs, samples = batch(size=8)
    data = dict(inputs=list(inputs), data_samples=samples)
    optim = OptimWrapper(torch.optim.SGD(distiller.parameters(), lr=0.0))
    distiller.train_step(data, optim)
    assert torch.equal(seen['teacher'], seen['student'])
    # A batch augment ran: the images are not merely normalised.
    assert not torch.allclose(seen['student'], (inputs - 0.5) / 2.0)


def test_patch_tokens_matched_for_a_student_without_class_token(teacher_ckpt):
    student = classifier_cfg(backbone_cfg('ReLULinearAttention', **NO_CLS))
    distiller = build(teacher_ckpt, student=student).train()
    inputs, samples = batch()
    losses = distiller(inputs, samples, mode='loss')
    with torch.no_grad():
        t_out = attention_outputs(distiller.teacher, inputs)
        s_out = attention_outputs(distiller.student, inputs)
    assert s_out[0].shape[1] == 16 and t_out[0].shape[1] == 17
    for i in range(2):
        torch.testing.assert_close(
            losses[f'attn_out_mse.{i}'].double(),
            mse64(s_out[i], t_out[i][:, 1:]),
        )


def test_block_subset_and_extra_losses(teacher_ckpt):
    distiller = build(
        teacher_ckpt,
        distill_losses=[
            dict(
                type='AttentionOutputMSE',
                loss_weight=10.0,
                blocks=[-1],
                tokens='patch',
            ),
            dict(type='AttentionMapMSE', loss_weight=100.0),
            dict(type='LogitKD', loss_weight=2.0, temperature=4.0),
        ],
    ).train()
    inputs, samples = batch()
    losses = distiller(inputs, samples, mode='loss')
    assert set(losses) == {
        'loss_task',
        'loss_distill',
        'attn_out_mse.1',
        'attn_map_mse.0',
        'attn_map_mse.1',
        'logit_kl',
    }
    with torch.no_grad():
        t_out = attention_outputs(distiller.teacher, inputs)
        s_out = attention_outputs(distiller.student, inputs)
    torch.testing.assert_close(
        losses['attn_out_mse.1'].double(),
        mse64(s_out[1][:, 1:], t_out[1][:, 1:]),
    )
    expected = (
        10 * losses['attn_out_mse.1']
        + 100 * (losses['attn_map_mse.0'] + losses['attn_map_mse.1']) / 2
        + 2 * 16 * losses['logit_kl']
    )
    torch.testing.assert_close(losses['loss_distill'], expected)
    losses['loss_distill'].backward()
    assert (
        distiller.student.backbone.layers[0].attn.qkv.weight.grad.abs().sum()
        > 0
    )


def test_linear_decay_hook(teacher_ckpt):
    distiller = build(teacher_ckpt).train()
    hook = HOOKS.build(dict(type='DistillLossDecayHook', end_factor=0.2))
    inputs, samples = batch()
    full = distiller(inputs, samples, mode='loss')['loss_distill']
    runner = types.SimpleNamespace(model=distiller, iter=5, max_iters=10)
    hook.before_train_iter(runner, 0)
    assert distiller.distill_scale == pytest.approx(0.6)
    decayed = distiller(inputs, samples, mode='loss')['loss_distill']
    torch.testing.assert_close(decayed, 0.6 * full)
    runner.iter = 0
    hook.before_train_iter(runner, 0)
    assert distiller.distill_scale == 1
    with pytest.raises(TypeError, match='needs an AttentionDistiller'):
        hook.before_train_iter(
            types.SimpleNamespace(
                model=distiller.student, iter=0, max_iters=1
            ),
            0,
        )
    with pytest.raises(ValueError, match='end_factor'):
        HOOKS.build(dict(type='DistillLossDecayHook', end_factor=-1))
