"""The softmax checkpoint of a run is read once: the distiller's teacher,
the init hook's copy and the conversion-aware optimizer groups all take it
from one SoftmaxCheckpoint (a real Runner on a Fashion-MNIST subset)."""

import os.path as osp

import pytest
from mmengine.runner import Runner
from tiny_runs import tiny_distill_cfg

from mmlvit.transfer import SoftmaxCheckpoint, readers, softmax_checkpoint_of


@pytest.fixture
def reads(monkeypatch):
    """The paths of every checkpoint file the softmax reader opens."""
    opened = []
    real = readers.load_checkpoint_file

    def counting(path, *args, **kwargs):
        opened.append(osp.realpath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(readers, 'load_checkpoint_file', counting)
    return opened


def run(repo_root, work_dir, teacher, hook=None, resume=False, iters=2):
    cfg = tiny_distill_cfg(repo_root, work_dir, teacher, iters)
    cfg.default_hooks.checkpoint = dict(
        type='CheckpointHook', interval=1, by_epoch=False
    )
    cfg.optim_wrapper.constructor = 'ConversionAwareOptimWrapperConstructor'
    cfg.optim_wrapper.paramwise_cfg = dict(fresh_lr_mult=10.0)
    cfg.custom_hooks = [
        dict(
            type='SoftmaxToLinearInitHook', setting='MLPCopy', **(hook or {})
        ),
        dict(type='FreezeCopiedHook', iters=1),
    ]
    cfg.resume = resume
    runner = Runner.from_cfg(cfg)
    runner.train()
    return runner


def test_one_read_per_run(
    repo_root, tmp_path, tiny_teacher_checkpoint, fashion_mnist_root, reads
):
    teacher = osp.realpath(tiny_teacher_checkpoint)
    runner = run(repo_root, tmp_path, tiny_teacher_checkpoint)
    assert reads == [teacher]
    groups = runner.optim_wrapper.optimizer.param_groups
    assert {g['copied'] for g in groups} == {True, False}
    source = softmax_checkpoint_of(runner.model)
    assert isinstance(source, SoftmaxCheckpoint)
    assert source.refers_to(tiny_teacher_checkpoint)

    # The hook naming the teacher's file itself: still one read.
    reads.clear()
    run(
        repo_root,
        tmp_path / 'named',
        tiny_teacher_checkpoint,
        hook=dict(checkpoint=tiny_teacher_checkpoint),
    )
    assert reads == [teacher]

    # Resumed: the teacher is read, the init copies nothing.
    reads.clear()
    run(repo_root, tmp_path, tiny_teacher_checkpoint, resume=True, iters=3)
    assert reads.count(teacher) == 1


def test_weights_are_released_after_the_init(
    repo_root, tmp_path, tiny_teacher_checkpoint, fashion_mnist_root, reads
):
    runner = run(repo_root, tmp_path, tiny_teacher_checkpoint, iters=1)
    source = softmax_checkpoint_of(runner.model)
    assert len(reads) == 1
    assert source.state_dict  # asked for after the run: read again
    assert len(reads) == 2


def test_a_checkpoint_names_its_file_and_format(tiny_teacher_checkpoint):
    source = SoftmaxCheckpoint(tiny_teacher_checkpoint, 'mmpretrain')
    assert source.refers_to(tiny_teacher_checkpoint)
    assert source.refers_to(tiny_teacher_checkpoint, 'mmpretrain')
    assert not source.refers_to(tiny_teacher_checkpoint, 'timm')
    assert not source.refers_to('other.pth')
    with pytest.raises(ValueError, match='Unknown checkpoint format'):
        SoftmaxCheckpoint(tiny_teacher_checkpoint, 'tf')
