"""mmengine Runners and configs for tiny training runs in the tests."""

import os.path as osp

from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

TINY_DISTILL = 'tests/data/configs/tiny_gla_distill_fmnist.py'


def iter_runner(
    model, work_dir, dataset, *, batch_size, collate, iters, optimizer, **cfg
):
    """A Runner that trains ``model`` for ``iters`` iterations on
    ``dataset`` in order (batches of ``batch_size`` joined by the collate
    function named ``collate``), in mmpretrain's scope and saving no
    checkpoint; ``cfg`` adds to the Runner's arguments (hooks, seed...)."""
    return Runner(
        model=model,
        work_dir=str(work_dir),
        train_dataloader=dict(
            dataset=dataset,
            sampler=dict(type='DefaultSampler', shuffle=False),
            batch_size=batch_size,
            collate_fn=dict(type=collate),
        ),
        train_cfg=dict(by_epoch=False, max_iters=iters),
        optim_wrapper=dict(optimizer=optimizer),
        default_hooks=dict(checkpoint=None),
        default_scope='mmpretrain',
        **cfg,
    )


def train_from_cfg(cfg, *hooks):
    """``Runner.from_cfg(cfg)`` with ``hooks`` registered, after its
    training; returns the Runner."""
    runner = Runner.from_cfg(cfg)
    for hook in hooks:
        runner.register_hook(hook)
    runner.train()
    return runner


def tiny_distill_cfg(repo_root, work_dir, teacher, iters):
    """The tiny GLA distillation config (tests/data/configs, on
    Fashion-MNIST) distilling ``teacher`` for ``iters`` iterations in
    ``work_dir``, without validation."""
    init_default_scope('mmpretrain')
    cfg = Config.fromfile(osp.join(repo_root, TINY_DISTILL))
    cfg.model.teacher_checkpoint = teacher
    cfg.work_dir = str(work_dir)
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=iters)
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    return cfg
