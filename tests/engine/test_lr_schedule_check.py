"""A warning before training when the learning-rate schedule cannot work at
the run's real length: a warm-up longer than the run, a decay squeezed into
one iteration."""

import subprocess
from types import SimpleNamespace

from mmlvit.engine.hooks.lr_schedule_check import (
    lr_schedulers,
    schedule_warnings,
)

TINY = 'tests/data/configs/tiny_softmax_fmnist.py'


def scheduler(begin, end, by_epoch, **kwargs):
    return SimpleNamespace(
        param_name='lr', begin=begin, end=end, by_epoch=by_epoch, **kwargs
    )


def warm_up(end, by_epoch=False):
    return scheduler(0, end, by_epoch, start_factor=1e-3)


def test_a_warm_up_longer_than_the_run_is_named():
    (message,) = schedule_warnings([warm_up(500)], 10, per_epoch=1)
    assert message.startswith(
        'param_scheduler[0] (SimpleNamespace) warms the learning rate up '
        'until iteration 500, but this run has 10 iterations (1 per epoch)'
    )
    assert 'Shorten the warm-up' in message
    # Epochs count iterations of the real loader: 2 epochs x 4 = 8 > 6.
    assert schedule_warnings([warm_up(2, by_epoch=True)], 6, per_epoch=4)
    assert not schedule_warnings([warm_up(2, by_epoch=True)], 8, 4)


def test_a_decay_of_one_iteration_is_named():
    cosine = scheduler(1, 10**9, by_epoch=False)  # to the end of training
    (message,) = schedule_warnings([warm_up(1), cosine], 2, per_epoch=1)
    assert message.startswith(
        'param_scheduler[1] (SimpleNamespace) covers one iteration (1) of '
        'this 2-iteration run'
    )
    assert not schedule_warnings([warm_up(1), cosine], 3, per_epoch=1)


def test_only_learning_rate_schedulers_are_read():
    momentum = SimpleNamespace(param_name='momentum')
    lr = warm_up(5)
    assert lr_schedulers([momentum, lr]) == [lr]
    assert lr_schedulers({'a': [lr], 'b': [momentum]}) == [lr]


def test_train_tool_warns_before_training(repo_root, python, tmp_path):
    """One 128-image batch per epoch, two epochs: the cosine after the
    one-epoch warm-up covers one iteration."""
    out = subprocess.run(
        [python, 'tools/train.py', TINY, '--work-dir', str(tmp_path)]
        + [
            '--no-validate',
            '--cfg-options',
            'train_dataloader.batch_size=128',
        ],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    log = out.stdout + out.stderr
    assert (
        'WARNING - param_scheduler[1] (CosineAnnealingLR) covers one '
        'iteration (1) of this 2-iteration run (1 per epoch)'
    ) in log
