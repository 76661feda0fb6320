"""SIGTERM / SIGUSR1 (what schedulers send before they kill a job) stop a
real tools/train.py process after the current iteration with a resumable
checkpoint, a log line and exit code 75; --resume finishes the run with the
weights of the uninterrupted run."""

import os
import re
import signal
import subprocess
import time

import torch
from tool_runs import free_port

from mmlvit.checkpoint import load_checkpoint_file
from mmlvit.checkpoint.preemption import PREEMPTED_EXIT_CODE

FLIP = 'tests/data/configs/tiny_softmax_flip_fmnist.py'
STOPPED = re.compile(
    r'Received (SIG\w+) [\d.]+ s ago: stopped training after iteration '
    r'(\d+) \(epoch (\d+), batch (\d+) of 4\) and saved (\S+)\. Run the '
    r'same command with --resume to continue from the next batch\. '
    r'Exiting with code 75\.'
)


def train(repo_root, python, work_dir, log_path, *extra):
    cmd = [python, 'tools/train.py', FLIP, '--work-dir', str(work_dir)]
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1')
    return subprocess.Popen(
        cmd + list(extra),
        cwd=repo_root,
        env=env,
        stdout=open(log_path, 'w'),
        stderr=subprocess.STDOUT,
    )


def signal_at_line(proc, log_path, line, signum, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, log_path.read_text()[-3000:]
        if log_path.exists() and line in log_path.read_text():
            proc.send_signal(signum)
            return proc.wait(timeout=120)
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f'no line {line!r} within {timeout} s')


def weights(path):
    return load_checkpoint_file(path)['state_dict']


def test_sigterm_saves_a_checkpoint_and_resume_finishes_identically(
    tmp_path, repo_root, python, fashion_mnist_root
):
    straight = train(repo_root, python, tmp_path / 'a', tmp_path / 'a.log')
    work_dir = tmp_path / 'b'
    log1 = tmp_path / 'b1.log'
    proc = train(repo_root, python, work_dir, log1)
    code = signal_at_line(proc, log1, 'Epoch(train) [2][2/4]', signal.SIGTERM)
    log = log1.read_text()
    assert code == PREEMPTED_EXIT_CODE == 75, log[-3000:]
    assert 'Traceback' not in log
    found = STOPPED.search(log)
    assert found, log[-3000:]
    name, step, epoch, batch, path = found.groups()
    step, epoch, batch = int(step), int(epoch), int(batch)
    # The iteration logged before the signal, or a later one.
    assert name == 'SIGTERM' and step >= 6 and step == (epoch - 1) * 4 + batch
    assert path == str(work_dir / f'iter_{step}.pth')
    saved = load_checkpoint_file(path)
    assert saved['meta']['epoch'] == epoch - 1
    assert saved['meta']['iter'] == step
    assert 'optimizer' in saved and 'param_schedulers' in saved
    assert (work_dir / 'last_checkpoint').read_text() == path
    assert not [n for n in os.listdir(work_dir) if n.endswith('.tmp')]

    log2 = tmp_path / 'b2.log'
    resumed = train(repo_root, python, work_dir, log2, '--resume')
    assert resumed.wait(timeout=300) == 0, log2.read_text()[-3000:]
    log = log2.read_text()
    assert f'resumed epoch: {epoch - 1}, iter: {step}' in log
    # Every iteration trained once: the resumed run starts with the next.
    trained = re.findall(r'Epoch\(train\) \[(\d)\]\[(\d)/4\]', log)
    expected = [(e, b) for e in '123' for b in '1234'][step:]
    assert trained == expected
    assert straight.wait(timeout=300) == 0
    a, b = (
        weights(tmp_path / 'a' / 'epoch_3.pth'),
        weights(work_dir / 'epoch_3.pth'),
    )
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    # The stop's checkpoint goes once a newer checkpoint is complete.
    assert not os.path.exists(path)


def test_sigusr1_stops_the_same_way(
    tmp_path, repo_root, python, fashion_mnist_root
):
    log_path = tmp_path / 'run.log'
    proc = train(repo_root, python, tmp_path / 'w', log_path)
    code = signal_at_line(
        proc, log_path, 'Epoch(train) [1][1/4]', signal.SIGUSR1
    )
    log = log_path.read_text()
    assert code == 75, log[-3000:]
    name, step = STOPPED.search(log).group(1, 2)
    assert name == 'SIGUSR1'
    assert load_checkpoint_file(tmp_path / 'w' / f'iter_{step}.pth')


def test_slurm_train_asks_for_the_warning_signal(tmp_path, repo_root, python):
    """tools/slurm_train.sh passes srun --signal=USR1@120 (SIGNAL= drops
    it), so that Slurm warns the tasks before the time limit."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    srun = bin_dir / 'srun'
    srun.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$SRUN_ARGS_FILE"\n')
    srun.chmod(0o755)
    args_file = tmp_path / 'args'
    for signal_env, expected in ((None, True), ('', False)):
        env = dict(
            os.environ,
            PATH=f'{bin_dir}:{os.environ["PATH"]}',
            PYTHON=python,
            SRUN_ARGS_FILE=str(args_file),
        )
        if signal_env is not None:
            env['SIGNAL'] = signal_env
        out = subprocess.run(
            ['bash', 'tools/slurm_train.sh', 'P', 'J', 'C', 'W'],
            cwd=repo_root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        args = args_file.read_text().splitlines()
        assert ('--signal=USR1@120' in args) is expected, args


def test_sigterm_to_one_ddp_process_stops_every_process_with_a_checkpoint(
    tmp_path, repo_root, python, fashion_mnist_root
):
    """Two CPU DDP processes (tools/dist_train.sh); only rank 1 gets
    SIGTERM. Both stop after the same iteration (rank 0 logs that another
    process received it), rank 0 saves the checkpoint, both exit 75 after
    it is complete and the work-dir lock is released; --resume with two
    processes finishes the run."""
    from test_distributed import descendants

    work_dir = tmp_path / 'work'
    env = dict(
        os.environ,
        PYTHON=python,
        PORT=str(free_port()),
        OMP_NUM_THREADS='1',
        PYTHONUNBUFFERED='1',
    )
    cmd = ['bash', 'tools/dist_train.sh', FLIP, '2', '--work-dir']
    log_path = tmp_path / 'first.log'
    proc = subprocess.Popen(
        cmd + [str(work_dir)],
        cwd=repo_root,
        env=env,
        stdout=open(log_path, 'w'),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 180
        while '[2][1/2]' not in log_path.read_text():
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.02)
        ranks = {}
        for pid in descendants(proc.pid):
            try:
                with open(f'/proc/{pid}/environ', 'rb') as file:
                    environ = file.read()
            except OSError:  # a short-lived helper process already gone
                continue
            variables = dict(
                item.split(b'=', 1)
                for item in environ.split(b'\0')
                if b'=' in item
            )
            # The training processes: torchrun's workers carry RANK; their
            # own children inherit it and are listed after them, so keep the
            # first process found per rank.
            if b'RANK' in variables and b'LOCAL_RANK' in variables:
                ranks.setdefault(variables[b'RANK'], pid)
        os.kill(ranks[b'1'], signal.SIGTERM)
        assert proc.wait(timeout=120) != 0  # torchrun reports failed workers
        log = log_path.read_text()
        assert len(re.findall(r'exitcode\s*: 75 ', log)) == 2, log[-3000:]
        found = STOPPED.pattern.replace(r'[\d.]+ s ago', 'by another process')
        found = re.search(found.replace('of 4', 'of 2'), log)
        assert found, log[-3000:]
        path = found.group(5)
        assert load_checkpoint_file(path)['meta']['iter'] == int(
            found.group(2)
        )
    finally:
        if proc.poll() is None:  # the job did not end: leave nothing behind
            for pid in [*descendants(proc.pid), proc.pid]:
                os.kill(pid, signal.SIGKILL)
    assert not (work_dir / 'train.lock').exists()

    log_path = tmp_path / 'second.log'
    resumed = subprocess.run(
        cmd + [str(work_dir), '--resume'],
        cwd=repo_root,
        env=env,
        stdout=open(log_path, 'w'),
        stderr=subprocess.STDOUT,
        timeout=300,
    )
    assert resumed.returncode == 0, log_path.read_text()[-3000:]
    assert f'iter: {found.group(2)}' in log_path.read_text()
    assert load_checkpoint_file(work_dir / 'epoch_3.pth')['meta']['iter'] == 6
