"""A work directory holds one live tools/train.py run: a second run on it
stops at start-up naming the first; a lock left by a killed run is taken
over with a warning (real processes)."""

import json
import os
import signal
import socket
import subprocess
import time

from mmlvit.checkpoint.work_dir_lock import LOCK_NAME

CONFIG = 'tests/data/configs/tiny_softmax_fmnist.py'


def train(repo_root, python, work_dir, log_path, *extra):
    cmd = [python, 'tools/train.py', CONFIG, '--work-dir', str(work_dir)]
    return subprocess.Popen(
        cmd + list(extra),
        cwd=repo_root,
        env=dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1'),
        stdout=open(log_path, 'w'),
        stderr=subprocess.STDOUT,
    )


def wait_for_line(proc, log_path, line, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, log_path.read_text()[-3000:]
        if log_path.exists() and line in log_path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f'no line {line!r} within {timeout} s')


def test_second_run_on_a_busy_work_dir_stops_and_names_the_first(
    tmp_path, repo_root, python, fashion_mnist_root
):
    work_dir = tmp_path / 'work'
    first = train(
        repo_root,
        python,
        work_dir,
        tmp_path / 'first.log',
        '--cfg-options',
        'train_cfg.max_epochs=2000',
    )
    wait_for_line(first, tmp_path / 'first.log', '[1][1/4]')
    lock = json.loads((work_dir / LOCK_NAME).read_text())
    assert lock['pid'] == first.pid
    second = train(repo_root, python, work_dir, tmp_path / 'second.log')
    assert second.wait(timeout=180) == 1
    log = (tmp_path / 'second.log').read_text()
    assert (
        f'WorkDirBusyError: {work_dir} is in use by another training run: '
        f'pid {first.pid} on host {socket.gethostname()}'
    ) in log
    assert 'Epoch(train)' not in log
    # Only the first run's log folder and checkpoints are there.
    assert len([p for p in work_dir.iterdir() if p.is_dir()]) == 1
    assert first.poll() is None
    # Stopped by a signal (exit 75), the first run releases the lock.
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 75
    assert not (work_dir / LOCK_NAME).exists()


def test_lock_of_a_killed_run_is_taken_over_with_a_warning(
    tmp_path, repo_root, python, fashion_mnist_root
):
    work_dir = tmp_path / 'work'
    killed = train(repo_root, python, work_dir, tmp_path / 'killed.log')
    deadline = time.time() + 180
    while not (work_dir / LOCK_NAME).exists():
        assert time.time() < deadline and killed.poll() is None
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert json.loads((work_dir / LOCK_NAME).read_text())['pid'] == killed.pid
    log_path = tmp_path / 'next.log'
    proc = train(
        repo_root,
        python,
        work_dir,
        log_path,
        '--cfg-options',
        'train_cfg.max_epochs=2',
    )
    assert proc.wait(timeout=300) == 0, log_path.read_text()[-3000:]
    log = log_path.read_text()
    assert (
        f'WARNING - Took over {work_dir / LOCK_NAME} from a run that ended '
        f'without releasing it (process {killed.pid} no longer exists; it '
        f'was pid {killed.pid} on host {socket.gethostname()}'
    ) in log
    assert not (work_dir / LOCK_NAME).exists()
