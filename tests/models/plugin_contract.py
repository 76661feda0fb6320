"""Running registry-driven contract tests with a test plugin registered:
what test_operator_registration.py and test_loss_registration.py share."""

import atexit
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def start_with_plugin(plugin, keyword, test_file):
    """The tests of ``test_file`` matching ``keyword``, run with
    ``-p plugin`` in a fresh pytest process. Started when the calling
    module is collected so that it overlaps the rest of the suite; killed
    at exit if unread.

    Returns:
        subprocess.Popen: stdout and stderr piped, as text.
    """
    env = dict(os.environ, PYTHONPATH=str(HERE), OMP_NUM_THREADS='1')
    process = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'pytest',
            '-p',
            plugin,
            '-v',
            '-p',
            'no:cacheprovider',
            '-k',
            keyword,
            str(HERE / test_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=HERE.parent.parent,
    )
    atexit.register(process.kill)
    return process


def registry_tests(module):
    """Names of the tests of ``module`` parametrised over the registry
    (``@pytest.mark.parametrize('name', ...)``)."""
    return {
        name
        for name, fn in vars(module).items()
        if name.startswith('test_')
        and any(
            mark.name == 'parametrize' and mark.args[0] == 'name'
            for mark in getattr(fn, 'pytestmark', [])
        )
    }
