"""Training killed (SIGKILL) at many points, mid-save included, resumes
every time from the last complete checkpoint (tools/train.py subprocesses
with slowed checkpoint writes)."""

import os
import os.path as osp
import re
import signal
import subprocess
import time

from mmlvit.checkpoint import load_checkpoint_file

HERE = osp.dirname(osp.abspath(__file__))
SLOW = 'tests/data/configs/tiny_softmax_slow_writes.py'
EPOCH_FILE = re.compile(r'^epoch_(\d+)\.pth$')


def temp_of(name):
    """The temporary file of an (atomic, slowed) write of ``name``."""
    return re.compile(rf'^\.{re.escape(name)}\.\d+\.tmp$')


# Where each run is killed: the n-th appearance of a file being written.
KILL_POINTS = [
    ('mid-save of the first checkpoint', temp_of('epoch_1.pth'), 1),
    ('mid-write of last_checkpoint', temp_of('last_checkpoint'), 1),
    ('mid-save of a best checkpoint', re.compile(r'^\.best_.*\.tmp$'), 1),
    ('mid-save of a new epoch (max_keep_ckpts=1)', temp_of('epoch_3.pth'), 1),
    ('mid-write of last_checkpoint, later', temp_of('last_checkpoint'), 1),
]


def complete_epochs(work_dir):
    return sorted(
        int(m.group(1))
        for m in map(EPOCH_FILE.match, os.listdir(work_dir))
        if m
    )


def start(repo_root, python, work_dir, log_path, resume):
    cmd = [python, 'tools/train.py', SLOW, '--work-dir', str(work_dir)]
    cmd += ['--resume'] if resume else []
    env = dict(os.environ, PYTHONPATH=HERE, OMP_NUM_THREADS='1')
    log = open(log_path, 'w')
    return subprocess.Popen(
        cmd, cwd=repo_root, env=env, stdout=log, stderr=subprocess.STDOUT
    )


def kill_when_written(proc, work_dir, pattern, occurrence, timeout=120):
    """SIGKILL ``proc`` once a file matching ``pattern`` is being written
    for the ``occurrence``-th time; returns the complete epochs then."""
    seen, present = 0, False
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, 'training ended before the kill point'
        now = any(pattern.match(n) for n in os.listdir(work_dir))
        if now and not present:
            seen += 1
            if seen == occurrence:
                epochs = complete_epochs(work_dir)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return epochs
        present = now
        time.sleep(0.01)
    proc.kill()
    raise AssertionError(f'no write of {pattern.pattern} within {timeout}s')


def test_kills_at_every_point_resume_from_last_complete_checkpoint(
    tmp_path, repo_root, python, fashion_mnist_root
):
    work_dir = tmp_path / 'work'
    work_dir.mkdir()
    resume, previous = False, []
    for run, (where, pattern, occurrence) in enumerate(KILL_POINTS):
        log_path = tmp_path / f'run{run}.log'
        proc = start(repo_root, python, work_dir, log_path, resume)
        complete = kill_when_written(proc, work_dir, pattern, occurrence)
        log = log_path.read_text()
        assert 'Traceback' not in log, log[-3000:]
        if run > 0:
            # This run resumed from the newest checkpoint complete when the
            # previous run was killed (none: it started over).
            expected = previous[-1] if previous else None
            found = re.search(r'resumed epoch: (\d+)', log)
            assert (int(found.group(1)) if found else None) == expected, where
        # Once a checkpoint is complete, a kill never leaves none behind
        # (old checkpoints are deleted after the new one is written).
        assert complete or not previous, where
        previous, resume = complete, True
    log_path = tmp_path / 'final.log'
    proc = start(repo_root, python, work_dir, log_path, resume=True)
    assert proc.wait(timeout=300) == 0, log_path.read_text()[-3000:]
    log = log_path.read_text()
    assert f'resumed epoch: {previous[-1]}' in log
    assert 'Epoch(train) [4][4/4]' in log
    assert complete_epochs(work_dir) == [4]  # max_keep_ckpts=1
    assert not [n for n in os.listdir(work_dir) if n.endswith('.tmp')]
    assert load_checkpoint_file(work_dir / 'epoch_4.pth')['meta']['epoch'] == 4


SCORE = re.compile(r'accuracy/top1: ([\d.]+)')


def test_kill_during_the_save_after_a_new_best_keeps_one_true_best(
    tmp_path, repo_root, python, fashion_mnist_root
):
    """A new best score at epoch 2 (17.97 -> 25.78 here): best_*_epoch_2.pth
    is complete, then the rewrite of epoch_2.pth that records it is killed.
    The resumed run starts from the earlier epoch_2.pth, which names
    best_*_epoch_1.pth; it takes the best files' own scores instead, keeps
    one best file and ends with the true best score."""
    work_dir = tmp_path / 'work'
    work_dir.mkdir()
    first = tmp_path / 'first.log'
    proc = start(repo_root, python, work_dir, first, resume=False)
    # The second write of epoch_2.pth: the rewrite after the new best.
    kill_when_written(proc, work_dir, temp_of('epoch_2.pth'), 2)
    best = sorted(n for n in os.listdir(work_dir) if n.startswith('best_'))
    assert best == [
        'best_accuracy_top1_epoch_1.pth',
        'best_accuracy_top1_epoch_2.pth',
    ], first.read_text()[-3000:]
    recorded = [
        load_checkpoint_file(work_dir / name)['message_hub']['runtime_info'][
            'best_score'
        ]
        for name in best
    ]
    assert recorded[1] > recorded[0]
    scores = [float(s) for s in SCORE.findall(first.read_text())]

    second = tmp_path / 'second.log'
    proc = start(repo_root, python, work_dir, second, resume=True)
    assert proc.wait(timeout=300) == 0, second.read_text()[-3000:]
    log = second.read_text()
    assert 'resumed epoch: 2' in log
    assert (
        f'but {work_dir / "best_accuracy_top1_epoch_2.pth"} holds '
        f'{recorded[1]} (a save after that best score was killed or failed)'
    ) in log
    assert (
        f'Removed {work_dir / "best_accuracy_top1_epoch_1.pth"} (score '
        f'{recorded[0]})'
    ) in log
    scores += [float(s) for s in SCORE.findall(log)]
    best = [n for n in os.listdir(work_dir) if n.startswith('best_')]
    assert len(best) == 1, best
    # The log rounds scores to 4 decimals.
    info = load_checkpoint_file(work_dir / best[0])['message_hub']
    assert abs(info['runtime_info']['best_score'] - max(scores)) < 1e-4
    final = load_checkpoint_file(work_dir / 'epoch_4.pth')['message_hub']
    assert (
        final['runtime_info']['best_score']
        == info['runtime_info']['best_score']
    )
    assert final['runtime_info']['best_ckpt'] == str(work_dir / best[0])
