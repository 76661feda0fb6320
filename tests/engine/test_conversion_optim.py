"""Conversion-aware optimisation through a real Runner on a Fashion-MNIST
subset: the optimizer's copied/fresh groups follow the init hook's setting
(stated once, on the hook), fresh parameters get their learning-rate
multiplier through a schedule, FreezeCopiedHook keeps copied parameters
fixed for its iterations and needs the tags, and multipliers of 1 train
exactly as the default constructor."""

import pytest
import torch
from mmengine.hooks import Hook
from tiny_runs import tiny_distill_cfg, train_from_cfg

from mmlvit.transfer import load_softmax_checkpoint, plan_init


class Snapshots(Hook):
    """The student's parameters before training and after each iteration."""

    priority = 'LOWEST'

    def before_train(self, runner):
        self.states = [self.state(runner)]

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        self.states.append(self.state(runner))

    @staticmethod
    def state(runner):
        return {
            n: p.detach().clone()
            for n, p in runner.model.student.named_parameters()
        }


@pytest.fixture(scope='module')
def teacher_ckpt(tiny_teacher_checkpoint):
    return tiny_teacher_checkpoint


@pytest.fixture
def train(repo_root, tmp_path, teacher_ckpt, fashion_mnist_root):
    """train(**options) -> (runner, the student's parameter snapshots):
    the tiny distillation config for ``iters`` iterations in ``work_dir``
    (the test's tmp_path by default), its init hook's ``setting`` (None:
    no hook), the conversion-aware constructor with ``paramwise`` options,
    a FreezeCopiedHook for ``freeze`` iterations, a ``schedule``."""

    def run(
        paramwise=None,
        freeze=None,
        iters=3,
        setting='MLPCopy',
        schedule=None,
        work_dir=tmp_path,
    ):
        cfg = tiny_distill_cfg(repo_root, work_dir, teacher_ckpt, iters)
        cfg.default_hooks.checkpoint = None
        cfg.randomness = dict(seed=0)
        cfg.train_dataloader.collate_fn = dict(type='default_collate')
        if paramwise is not None:
            cfg.optim_wrapper.constructor = (
                'ConversionAwareOptimWrapperConstructor'
            )
            cfg.optim_wrapper.paramwise_cfg.update(paramwise)
        if freeze is not None:
            cfg.custom_hooks.append(
                dict(type='FreezeCopiedHook', iters=freeze)
            )
        if setting is None:
            cfg.custom_hooks = [
                h
                for h in cfg.custom_hooks
                if h['type'] != 'SoftmaxToLinearInitHook'
            ]
        else:
            cfg.custom_hooks[0]['setting'] = setting
        if schedule is not None:
            cfg.param_scheduler = schedule
        snapshots = Snapshots()
        return train_from_cfg(cfg, snapshots), snapshots.states

    return run


def test_groups_match_the_copy_report_and_fresh_lr_is_scaled(
    train, teacher_ckpt
):
    runner, states = train(
        paramwise=dict(fresh_lr_mult=10.0),
        freeze=2,
    )
    report = plan_init(
        runner.model.student, load_softmax_checkpoint(teacher_ckpt), 'MLPCopy'
    )
    copied = {'student.' + k for k in report.keys('copied')}
    assert copied and all('.ffn.' in k for k in copied)
    names = {id(p): n for n, p in runner.model.named_parameters()}
    groups = runner.optim_wrapper.optimizer.param_groups
    tags = {names[id(p)]: g['copied'] for g in groups for p in g['params']}
    trainable = {n for n, p in runner.model.student.named_parameters()}
    assert {n for n, c in tags.items() if c} == copied
    assert {n for n in tags if n.startswith('student.')} == {
        'student.' + n for n in trainable
    }
    lr = {g['copied']: g['lr'] for g in groups if g['params'][0].requires_grad}
    assert lr[False] == pytest.approx(10 * lr[True])

    # Copied: frozen in iterations 1-2, trained in 3. Fresh: trained from
    # the start (those behind mmpretrain's zero-initialised head get their
    # first gradient in iteration 2).
    before, *after = states
    for name in trainable:
        moved = [not torch.equal(before[name], s[name]) for s in after]
        if 'student.' + name in copied:
            assert moved == [False, False, True], name
        else:
            assert moved[1:] == [True, True], name


def copied_tags(runner):
    names = {id(p): n for n, p in runner.model.named_parameters()}
    groups = runner.optim_wrapper.optimizer.param_groups
    return {names[id(p)]: g['copied'] for g in groups for p in g['params']}


def test_groups_follow_the_hooks_setting(train, teacher_ckpt):
    runner, _ = train(
        paramwise=dict(fresh_lr_mult=2.0),
        setting='FullCopy',
        iters=1,
    )
    report = plan_init(
        runner.model.student,
        load_softmax_checkpoint(teacher_ckpt),
        'FullCopy',
    )
    copied = {'student.' + k for k in report.keys('copied')}
    assert any('.attn.' in k for k in copied)
    tags = copied_tags(runner)
    assert {n for n, c in tags.items() if c} == copied


def test_an_init_in_paramwise_cfg_is_refused(train):
    with pytest.raises(ValueError, match='remove paramwise_cfg.init'):
        train(
            paramwise=dict(init=dict(setting='MLPCopy')),
            iters=1,
        )


def test_the_schedule_keeps_the_multiplier(train, tmp_path):
    schedule = [
        dict(type='LinearLR', start_factor=0.1, by_epoch=False, end=2),
        dict(
            type='CosineAnnealingLR',
            by_epoch=False,
            begin=2,
            T_max=4,
            eta_min_ratio=0.1,  # eta_min follows each group's base lr
        ),
    ]
    default, _ = train(work_dir=tmp_path / 'a', schedule=schedule, iters=5)
    runner, _ = train(
        work_dir=tmp_path / 'b',
        paramwise=dict(fresh_lr_mult=10.0),
        schedule=schedule,
        iters=5,
    )
    (scheduled,) = {g['lr'] for g in default.optim_wrapper.param_groups}
    lrs = {}
    for group in runner.optim_wrapper.optimizer.param_groups:
        lrs.setdefault(group['copied'], set()).add(group['lr'])
    (fresh,), (copied,) = lrs[False], lrs[True]
    assert 0 < scheduled < 1e-2  # within the cosine, not at its start
    assert copied == pytest.approx(scheduled)
    assert fresh == pytest.approx(10 * scheduled)


def test_freeze_hook_needs_the_tagged_groups(train):
    with pytest.raises(
        ValueError, match='ConversionAwareOptimWrapperConstructor'
    ):
        train(freeze=1, iters=1)
    with pytest.raises(ValueError, match='add it to custom_hooks'):
        train(
            paramwise=dict(),
            freeze=1,
            setting=None,
            iters=1,
        )


def test_multipliers_of_one_train_exactly_as_the_default(train, tmp_path):
    _, default = train(work_dir=tmp_path / 'a')
    _, grouped = train(work_dir=tmp_path / 'b', paramwise=dict())
    for name, value in default[-1].items():
        assert torch.equal(value, grouped[-1][name]), name
