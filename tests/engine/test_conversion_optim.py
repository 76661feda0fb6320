"""Conversion-aware optimisation through a real Runner on a Fashion-MNIST
subset: the optimizer's copied/fresh groups follow the init hook's setting
(stated once, on the hook), fresh parameters get their learning-rate
multiplier through a schedule, FreezeCopiedHook keeps copied parameters
fixed for its iterations and needs the tags, and multipliers of 1 train
exactly as the default constructor."""

import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

from mmlvit.transfer import load_softmax_checkpoint, plan_init

CONFIG = 'tests/data/configs/tiny_gla_distill_fmnist.py'


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


def train(
    repo_root,
    work_dir,
    teacher,
    paramwise=None,
    freeze=None,
    iters=3,
    setting='MLPCopy',
    schedule=None,
):
    init_default_scope('mmpretrain')
    cfg = Config.fromfile(osp.join(repo_root, CONFIG))
    cfg.model.teacher_checkpoint = teacher
    cfg.work_dir = str(work_dir)
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=iters)
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.default_hooks.checkpoint = None
    cfg.randomness = dict(seed=0)
    cfg.train_dataloader.collate_fn = dict(type='default_collate')
    if paramwise is not None:
        cfg.optim_wrapper.constructor = (
            'ConversionAwareOptimWrapperConstructor'
        )
        cfg.optim_wrapper.paramwise_cfg.update(paramwise)
    if freeze is not None:
        cfg.custom_hooks.append(dict(type='FreezeCopiedHook', iters=freeze))
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
    runner = Runner.from_cfg(cfg)
    snapshots = Snapshots()
    runner.register_hook(snapshots)
    runner.train()
    return runner, snapshots.states


def test_groups_match_the_copy_report_and_fresh_lr_is_scaled(
    repo_root, tmp_path, teacher_ckpt, fashion_mnist_root
):
    runner, states = train(
        repo_root,
        tmp_path,
        teacher_ckpt,
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


def test_groups_follow_the_hooks_setting(
    repo_root, tmp_path, teacher_ckpt, fashion_mnist_root
):
    runner, _ = train(
        repo_root,
        tmp_path,
        teacher_ckpt,
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


def test_an_init_in_paramwise_cfg_is_refused(
    repo_root, tmp_path, teacher_ckpt, fashion_mnist_root
):
    with pytest.raises(ValueError, match='remove paramwise_cfg.init'):
        train(
            repo_root,
            tmp_path,
            teacher_ckpt,
            paramwise=dict(init=dict(setting='MLPCopy')),
            iters=1,
        )


def test_the_schedule_keeps_the_multiplier(
    repo_root, tmp_path, teacher_ckpt, fashion_mnist_root
):
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
    default, _ = train(
        repo_root, tmp_path / 'a', teacher_ckpt, schedule=schedule, iters=5
    )
    runner, _ = train(
        repo_root,
        tmp_path / 'b',
        teacher_ckpt,
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


def test_freeze_hook_needs_the_tagged_groups(
    repo_root, tmp_path, teacher_ckpt, fashion_mnist_root
):
    with pytest.raises(
        ValueError, match='ConversionAwareOptimWrapperConstructor'
    ):
        train(repo_root, tmp_path, teacher_ckpt, freeze=1, iters=1)
    with pytest.raises(ValueError, match='add it to custom_hooks'):
        train(
            repo_root,
            tmp_path,
            teacher_ckpt,
            paramwise=dict(),
            freeze=1,
            setting=None,
            iters=1,
        )


def test_multipliers_of_one_train_exactly_as_the_default(
    repo_root, tmp_path, teacher_ckpt, fashion_mnist_root
):
    _, default = train(repo_root, tmp_path / 'a', teacher_ckpt)
    _, grouped = train(
        repo_root, tmp_path / 'b', teacher_ckpt, paramwise=dict()
    )
    for name, value in default[-1].items():
        assert torch.equal(value, grouped[-1][name]), name
