"""A hung DDP worker ends the whole job within the configured collective
timeout (env_cfg.dist_cfg.timeout), with an error that says so."""

import os
import re
import signal
import subprocess
import time

from tool_runs import free_port

STOP_CONFIG = 'tests/data/configs/tiny_softmax_stop_worker.py'
TIMEOUT = 5  # env_cfg.dist_cfg.timeout in STOP_CONFIG
# torchrun (torch 2.14) gives a failed group's other workers a fixed 30 s
# to exit after SIGTERM before it sends SIGKILL; a stopped worker needs it.
SHUTDOWN = 30


def descendants(pid):
    """Ids of the processes below ``pid`` (torchrun starts its workers in
    their own sessions, so a process-group kill misses them)."""
    found = []
    for task in os.listdir(f'/proc/{pid}/task'):
        try:
            with open(f'/proc/{pid}/task/{task}/children') as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


def test_hung_worker_ends_job_within_timeout(
    tmp_path, repo_root, python, fashion_mnist_root
):
    """Rank 1 SIGSTOPs itself after its first iteration; rank 0's gradient
    all-reduce times out, and torchrun ends the job."""
    env = dict(
        os.environ,
        PYTHON=python,
        PORT=str(free_port()),
        OMP_NUM_THREADS='1',
        PYTHONPATH=os.path.join(repo_root, 'tests', 'engine'),
    )
    proc = subprocess.Popen(
        [
            'bash',
            'tools/dist_train.sh',
            STOP_CONFIG,
            '2',
            '--work-dir',
            str(tmp_path),
        ],
        cwd=repo_root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        log, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        # The job hangs: end it (launcher and workers) before failing.
        for pid in [*descendants(proc.pid), proc.pid]:
            os.kill(pid, signal.SIGKILL)
        log, _ = proc.communicate()
        raise AssertionError('the job did not end: ' + log[-3000:]) from None
    ended = time.time()
    stopped = re.search(r'StopWorkerHook: rank 1 stops at ([\d.]+)', log)
    assert stopped, log[-3000:]
    assert proc.returncode != 0
    assert (
        'CollectiveTimeoutError: Rank 0 of 2: a collective operation did '
        'not complete within env_cfg.dist_cfg.timeout=5 s: another worker '
        'is hung, stopped or unreachable.' in log
    ), log[-3000:]
    # Rank 0 gives up after the timeout (its own timestamps, in its log)...
    failed = re.search(r'\[rank0\]:.*Timed out waiting (\d+)ms', log)
    assert failed and int(failed.group(1)) == TIMEOUT * 1000, log[-3000:]
    # ...and the job ends after torchrun's grace period (slack for a loaded
    # machine); without the timeout it never ends.
    assert ended - float(stopped.group(1)) < TIMEOUT + SHUTDOWN + 15
