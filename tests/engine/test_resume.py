"""Resuming through a real mmengine Runner on a Fashion-MNIST subset: a run
stopped after an epoch and resumed ends bit-identical to the uninterrupted
run (default pipeline with RandomFlip); --resume refuses files without
training state and skips checkpoints that do not load."""

import io
import os
import os.path as osp
import shutil

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

from mmlvit.checkpoint import CheckpointError, load_checkpoint_file
from mmlvit.engine.runners.runner import Runner as MmlvitRunner

SOFTMAX = 'tests/data/configs/tiny_softmax_fmnist.py'
GLA_DISTILL = 'tests/data/configs/tiny_gla_distill_fmnist.py'


class Stop(Exception):
    """Stands for a kill after an epoch is complete (saved, validated)."""


class StopAfterEpoch(Hook):
    priority = 'LOWEST'

    def __init__(self, epoch):
        self.epoch = epoch

    def after_val_epoch(self, runner, metrics=None):
        if runner.epoch == self.epoch:
            raise Stop


def build_runner(repo_root, config, work_dir, runner_cls=Runner, **options):
    """A Runner as tools/train.py builds it, with the training pipeline of
    the Fashion-MNIST base (RandomFlip) instead of the tiny config's
    flip-free one."""
    init_default_scope('mmpretrain')
    cfg = Config.fromfile(osp.join(repo_root, config))
    cfg.train_dataloader.dataset.pipeline = cfg.train_pipeline
    cfg.randomness = dict(seed=0, deterministic=True)
    cfg.work_dir = str(work_dir)
    cfg.merge_from_dict(options)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].collate_fn = dict(type='default_collate')
    return runner_cls.from_cfg(cfg)


def final_weights(runner):
    return {k: v.clone() for k, v in runner.model.state_dict().items()}


@pytest.fixture(scope='module')
def teacher_ckpt(tiny_teacher_checkpoint):
    return tiny_teacher_checkpoint


@pytest.mark.parametrize('config', [SOFTMAX, GLA_DISTILL])
def test_resumed_run_is_bit_identical_to_uninterrupted_run(
    config, tmp_path, repo_root, fashion_mnist_root, teacher_ckpt
):
    options = dict(train_cfg=dict(max_epochs=3))
    if config == GLA_DISTILL:
        options['model'] = dict(teacher_checkpoint=teacher_ckpt)
    second = stop_and_resume(
        repo_root, config, tmp_path, StopAfterEpoch(2), **options
    )
    assert second.train_loop.epoch == 3


def stop_and_resume(repo_root, config, tmp_path, stop, **options):
    """Train straight through (in tmp_path/a), then a run stopped by the hook
    ``stop`` and resumed (in tmp_path/b); assert the same final weights and
    return the resumed runner."""
    straight = build_runner(repo_root, config, tmp_path / 'a', **options)
    straight.train()
    expected = final_weights(straight)

    first = build_runner(repo_root, config, tmp_path / 'b', **options)
    first.register_hook(stop)
    with pytest.raises(Stop):
        first.train()
    second = build_runner(
        repo_root, config, tmp_path / 'b', resume=True, **options
    )
    second.train()
    resumed = final_weights(second)
    assert expected.keys() == resumed.keys()
    differ = [k for k in expected if not torch.equal(expected[k], resumed[k])]
    assert not differ, differ
    return second


class StopAfterIter(Hook):
    """Stands for a kill after an iteration checkpoint is complete."""

    priority = 'LOWEST'

    def __init__(self, iteration):
        self.iteration = iteration

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        if runner.iter + 1 == self.iteration:
            raise Stop


def test_resume_within_an_epoch_is_bit_identical(
    tmp_path, repo_root, fashion_mnist_root
):
    """Iteration checkpoints every 3 iterations of 4-batch epochs: a run
    stopped after iteration 6 (epoch 2, batch 2) resumes from iter_6.pth
    with batch 3 of epoch 2, the random state of that point, and ends with
    the uninterrupted run's weights."""
    options = dict(
        train_cfg=dict(max_epochs=3),
        default_hooks=dict(checkpoint=dict(by_epoch=False, interval=3)),
    )
    second = stop_and_resume(
        repo_root,
        SOFTMAX,
        tmp_path,
        StopAfterIter(6),
        runner_cls=MmlvitRunner,
        **options,
    )
    log = open(second.logger.log_file).read()
    assert 'resumed epoch: 1, iter: 6' in log
    assert 'continuing with batch 3 of 4 (iteration 7)' in log
    assert 'Epoch(train) [2][1/4]' not in log
    assert 'fresh random numbers' not in log
    assert second.train_loop.iter == 12


@pytest.fixture(scope='module')
def finished(repo_root, fashion_mnist_root, tmp_path_factory):
    """Two epochs of the tiny softmax config with a best checkpoint."""
    work_dir = tmp_path_factory.mktemp('finished')
    build_runner(
        repo_root,
        SOFTMAX,
        work_dir,
        default_hooks=dict(checkpoint=dict(save_best='auto')),
    ).train()
    return work_dir


@pytest.mark.parametrize('kind', ['best', 'weights-only'])
def test_resume_of_a_file_without_training_state_is_refused(
    kind, finished, tmp_path, repo_root
):
    best = next(finished.glob('best_*.pth'))
    path = best
    if kind == 'weights-only':
        path = tmp_path / 'weights.pth'
        torch.save(load_checkpoint_file(best)['state_dict'], path)
    runner = build_runner(
        repo_root, SOFTMAX, tmp_path / 'new', resume=True, load_from=str(path)
    )
    with pytest.raises(CheckpointError) as err:
        runner.train()
    message = str(err.value)
    assert f'{path} cannot be resumed: it holds no' in message
    assert 'optimizer' in message
    assert f'--cfg-options load_from={path} (without --resume)' in message


def truncated(path):
    good = path.read_bytes()
    return good[: len(good) // 3]


def malformed_meta(path):
    checkpoint = load_checkpoint_file(path)
    checkpoint['meta'].update(epoch=3, iter='x')
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    'damage, reason',
    [
        (truncated, 'Cannot read '),
        (malformed_meta, "meta.iter is 'x' (str), not a non-negative integer"),
    ],
)
def test_auto_resume_skips_a_corrupt_newest_checkpoint(
    damage, reason, finished, tmp_path, repo_root
):
    work_dir = tmp_path / 'work'
    shutil.copytree(finished, work_dir)
    (work_dir / 'epoch_3.pth').write_bytes(damage(work_dir / 'epoch_2.pth'))
    runner = build_runner(
        repo_root, SOFTMAX, work_dir, resume=True, train_cfg=dict(max_epochs=3)
    )
    runner.train()
    log = open(runner.logger.log_file).read()
    assert (
        f'Resuming from {work_dir / "epoch_2.pth"}; skipped newer checkpoints '
        f'that cannot be resumed: {work_dir / "epoch_3.pth"} ({reason}'
    ) in log
    assert 'resumed epoch: 2' in log
    assert load_checkpoint_file(work_dir / 'epoch_3.pth')['meta']['epoch'] == 3


def test_auto_resume_refuses_to_start_over_when_no_checkpoint_loads(
    finished, tmp_path, repo_root
):
    work_dir = tmp_path / 'work'
    shutil.copytree(finished, work_dir)
    for name in os.listdir(work_dir):
        if name.startswith('epoch_'):
            (work_dir / name).write_bytes(b'not a checkpoint')
    runner = build_runner(repo_root, SOFTMAX, work_dir, resume=True)
    with pytest.raises(CheckpointError, match='none can be resumed'):
        runner.train()
    assert (work_dir / 'epoch_2.pth').read_bytes() == b'not a checkpoint'


class RecordLR(Hook):
    """The first parameter group's learning rate at every iteration."""

    def __init__(self):
        self.lrs = {}

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        group = runner.optim_wrapper.optimizer.param_groups[0]
        self.lrs[runner.iter] = group['lr']


def test_resume_with_more_epochs_follows_the_longer_schedule(
    finished, tmp_path, repo_root
):
    """Two finished epochs (warm-up, then cosine to 1e-6) resumed with
    max_epochs=3: the schedule is rebuilt for 3 epochs, so the third epoch
    trains at exactly the learning rates of a run of 3 epochs from the
    start, not at the finished cosine's minimum."""
    three = dict(train_cfg=dict(max_epochs=3))
    straight = build_runner(repo_root, SOFTMAX, tmp_path / 'a', **three)
    expected = RecordLR()
    straight.register_hook(expected)
    straight.train()

    work_dir = tmp_path / 'b'
    shutil.copytree(finished, work_dir)
    resumed = build_runner(repo_root, SOFTMAX, work_dir, resume=True, **three)
    got = RecordLR()
    resumed.register_hook(got)
    resumed.train()
    third = {i: lr for i, lr in expected.lrs.items() if i >= 8}
    assert sorted(got.lrs) == sorted(third) == list(range(8, 12))
    assert got.lrs == third
    assert third[8] > 1e-4  # half-way down the cosine, not at 1e-6
    log = open(resumed.logger.log_file).read()
    assert 'param_scheduler[1] (CosineAnnealingLR): end 8 -> 12' in log
    assert 'the parameter schedule is rebuilt' in log


def test_resuming_a_finished_run_says_it_is_finished(
    finished, tmp_path, repo_root
):
    work_dir = tmp_path / 'work'
    shutil.copytree(finished, work_dir)
    before = sorted(os.listdir(work_dir))
    runner = build_runner(repo_root, SOFTMAX, work_dir, resume=True)
    iterations = RecordLR()
    runner.register_hook(iterations)
    runner.train()
    assert not iterations.lrs
    log = open(runner.logger.log_file).read()
    assert (
        f'Nothing to train: {work_dir / "epoch_2.pth"} ends at epoch 2 of '
        'train_cfg.max_epochs=2, so this run is finished.'
    ) in log
    assert 'the parameter schedule is rebuilt' not in log
    after = sorted(n for n in os.listdir(work_dir) if n in before)
    assert after == before


@pytest.mark.parametrize(
    'meta, problem',
    [
        ('a string', "meta is 'a string' (str), not a dict"),
        (
            dict(epoch='abc', iter=8),
            "meta.epoch is 'abc' (str), not a non-negative integer",
        ),
        (
            dict(epoch=-5, iter=-1),
            'meta.epoch is -5 (int), not a non-negative integer; '
            'meta.iter is -1 (int), not a non-negative integer',
        ),
        (
            dict(epoch=3, iter=2),
            'meta.iter (2) is smaller than meta.epoch (3)',
        ),
        (dict(epoch=2, iter=8, seed='0'), "meta.seed is '0' (str)"),
    ],
)
def test_malformed_meta_is_refused_before_anything_is_resumed(
    meta, problem, finished, tmp_path, repo_root
):
    checkpoint = load_checkpoint_file(finished / 'epoch_2.pth')
    checkpoint['meta'] = meta
    path = tmp_path / 'edited.pth'
    torch.save(checkpoint, path)
    runner = build_runner(
        repo_root, SOFTMAX, tmp_path / 'new', resume=True, load_from=str(path)
    )
    iterations = RecordLR()
    runner.register_hook(iterations)
    with pytest.raises(CheckpointError) as err:
        runner.train()
    assert f'{path} cannot be resumed: {problem}' in str(err.value)
    assert not iterations.lrs
    log = open(runner.logger.log_file).read()
    assert 'resumed epoch' not in log


def test_epoch_checkpoint_resumed_with_another_batch_size_starts_the_epoch(
    finished, tmp_path, repo_root
):
    """epoch_2.pth of 4-batch epochs (iteration 8) resumed with batch size
    48 (3 batches per epoch): epoch 3 starts with its first batch; the
    iteration count alone (8 - 2 * 3 = 2) would skip two batches."""
    work_dir = tmp_path / 'work'
    shutil.copytree(finished, work_dir)
    runner = build_runner(
        repo_root,
        SOFTMAX,
        work_dir,
        runner_cls=MmlvitRunner,
        resume=True,
        train_cfg=dict(max_epochs=3),
        train_dataloader=dict(batch_size=48),
    )
    runner.train()
    log = open(runner.logger.log_file).read()
    assert 'Resuming within epoch' not in log
    assert 'Epoch(train) [3][1/3]' in log
    assert runner.iter == 8 + 3
