"""The project's tools and launcher scripts run as subprocesses."""

import os
import shutil
import socket
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).parents[1]


def free_port():
    """A TCP port free on 127.0.0.1 now, for a distributed job's
    rendezvous (so that two test runs on one machine do not collide)."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def interpreter_env():
    """The environment of a script run under Triton's interpreter on the
    CPU only (TRITON_INTERPRET is read when triton imports): the
    repository first on PYTHONPATH, one thread unless OMP_NUM_THREADS is
    set."""
    paths = [str(REPO_ROOT), *os.environ.get('PYTHONPATH', '').split(':')]
    env = dict(
        os.environ,
        TRITON_INTERPRET='1',
        CUDA_VISIBLE_DEVICES='',
        PYTHONPATH=':'.join(p for p in paths if p),
    )
    env.setdefault('OMP_NUM_THREADS', '1')
    return env


def source_copy(dest):
    """Copy the checkout's package sources (what ``pip`` builds from) to
    ``dest``, so that a build writes its ``mmlvit/.mim`` there and never
    into the checkout other tests read."""
    for name in (
        'mmlvit',
        'configs',
        'tools',
        'checkpoints',
        'requirements',
        'setup.py',
        'README.md',
        'MANIFEST.in',
        'model-index.yml',
    ):
        src, dst = REPO_ROOT / name, Path(dest) / name
        if src.is_dir():
            shutil.copytree(
                src, dst, ignore=shutil.ignore_patterns('.mim', '__pycache__')
            )
        else:
            shutil.copyfile(src, dst)
    return Path(dest)


def mim_env(site, python):
    """The environment of a ``mim`` run against the install in ``site``
    (first on PYTHONPATH), with ``python``'s folder first on PATH."""
    return dict(
        os.environ,
        PYTHONPATH=str(site),
        PATH=os.path.dirname(python) + os.pathsep + os.environ['PATH'],
        OMP_NUM_THREADS='1',
    )


def one_batch_options(data_root):
    """``--cfg-options`` for two epochs of one 32-image batch of the
    Fashion-MNIST at ``data_root`` (validation and test on 32 images)."""
    return [
        f'{split}_dataloader.dataset.data_root={data_root}'
        for split in ('train', 'val', 'test')
    ] + [
        'train_dataloader.dataset.indices=32',
        'train_dataloader.batch_size=32',
        'val_dataloader.dataset.indices=32',
        'test_dataloader.dataset.indices=32',
        'train_cfg.max_epochs=2',
    ]


def run(cmd, cwd, env=None, timeout=600):
    """Run ``cmd`` in ``cwd`` (text output captured); returns the
    CompletedProcess whatever its exit status."""
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def run_ok(cmd, cwd, env=None, timeout=600):
    """``run``, asserting exit status 0 (the assertion shows the tails of
    stdout and stderr); returns the CompletedProcess."""
    out = run(cmd, cwd, env, timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def run_log(cmd, cwd, env=None, timeout=600):
    """``run_ok``'s stdout + stderr."""
    out = run_ok(cmd, cwd, env, timeout)
    return out.stdout + out.stderr


def launch(script, args, cwd, python, timeout=600):
    """``bash SCRIPT ARGS`` (a tools/*.sh launcher) with ``python`` as
    PYTHON, a free port as PORT and one thread per process; asserts exit
    status 0 and returns stdout + stderr."""
    env = dict(
        os.environ, PYTHON=python, PORT=str(free_port()), OMP_NUM_THREADS='1'
    )
    return run_log(['bash', script, *args], cwd, env, timeout)


def resume_in_copy(python, config, work_dir, copy, cwd, *options):
    """``tools/train.py CONFIG --resume`` in a copy (at ``copy``) of a
    finished run's ``work_dir``, with ``--cfg-options OPTIONS``; asserts
    exit status 0 and returns stdout + stderr."""
    shutil.copytree(work_dir, copy)
    return run_log(
        [python, 'tools/train.py', config, '--work-dir', str(copy)]
        + ['--resume', '--cfg-options', *options],
        cwd,
    )
