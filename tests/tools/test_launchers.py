"""The launcher scripts (dist_train.sh, dist_test.sh, slurm_train.sh) pick
an interpreter that has torch, or say how to get one."""

import os
import shutil
import venv

import pytest
from tool_runs import run

LAUNCHERS = {
    'dist_train.sh': ['CONFIG', '1'],
    'dist_test.sh': ['CONFIG', 'CKPT', '1'],
    'slurm_train.sh': ['PARTITION', 'JOB', 'CONFIG', 'WORK_DIR'],
}
SYSTEM_PATH = '/usr/local/bin:/usr/bin:/bin'


@pytest.fixture(scope='module')
def torchless_python(tmp_path_factory):
    """A fresh virtualenv's interpreter: it cannot import torch."""
    folder = tmp_path_factory.mktemp('torchless')
    venv.create(folder, with_pip=False)
    return str(folder / 'bin' / 'python')


def launch(script, env, cwd, *args):
    return run(['bash', script, *args], cwd, env, timeout=120)


def test_dist_train_uses_project_venv_when_not_activated(repo_root, python):
    """With the venv off PATH and PYTHON unset, torchrun and train.py still
    run in .venv (train.py imports mmlvit before it parses --help)."""
    assert os.path.samefile(
        os.path.join(repo_root, '.venv', 'bin', 'python'), python
    ), 'the tests run in the project venv (make setup creates it)'
    env = {k: v for k, v in os.environ.items() if k != 'PYTHON'}
    env.update(PATH=SYSTEM_PATH, VIRTUAL_ENV='', OMP_NUM_THREADS='1')
    out = launch('tools/dist_train.sh', env, repo_root, 'CONFIG', '1', '-h')
    assert out.returncode == 0, out.stderr[-3000:]
    assert 'Train a model' in out.stdout
    assert 'No module named' not in out.stderr


@pytest.mark.parametrize('script', sorted(LAUNCHERS))
def test_python_override_without_torch_is_named(
    script, torchless_python, repo_root
):
    """PYTHON overrides the venv; an interpreter without torch stops the
    script before it launches anything, with the fix in the message."""
    env = dict(os.environ, PYTHON=torchless_python, PATH=SYSTEM_PATH)
    out = launch(f'tools/{script}', env, repo_root, *LAUNCHERS[script])
    assert out.returncode == 1
    assert (
        f"{script}: the Python interpreter '{torchless_python}' cannot "
        'import torch' in out.stderr
    )
    assert "'make setup'" in out.stderr and 'PYTHON=' in out.stderr
    assert 'srun' not in out.stderr and 'Traceback' not in out.stderr


def test_no_venv_and_no_torch_on_path(tmp_path, torchless_python, repo_root):
    """A copy of the scripts outside the project (as mim installs them):
    python3 from PATH is tried, and it lacks torch."""
    tools = tmp_path / 'tools'
    tools.mkdir()
    for name in ('dist_train.sh', 'torchrun.sh', 'find_python.sh'):
        shutil.copy(os.path.join(repo_root, 'tools', name), tools)
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'python3').symlink_to(torchless_python)
    env = {k: v for k, v in os.environ.items() if k != 'PYTHON'}
    env.update(PATH=f'{bin_dir}:{SYSTEM_PATH}')
    out = launch(str(tools / 'dist_train.sh'), env, tmp_path, 'CONFIG', '1')
    assert out.returncode == 1
    assert (
        f"dist_train.sh: the Python interpreter '{bin_dir}/python3' cannot "
        'import torch' in out.stderr
    )
