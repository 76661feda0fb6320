"""A script of this folder run under Triton's interpreter in a fresh
process, on CPU only (TRITON_INTERPRET is read when triton imports).

A test module starts it when it is collected, so that its single-threaded
work overlaps the rest of the suite; it is killed at exit if no test read
it. Its report is the JSON of its last line of output.
"""

import atexit
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO_ROOT = HERE.parents[1]


def start(script):
    """Start ``script`` (a file of this folder); returns the process."""
    paths = [str(REPO_ROOT), *os.environ.get('PYTHONPATH', '').split(':')]
    env = dict(
        os.environ,
        TRITON_INTERPRET='1',
        CUDA_VISIBLE_DEVICES='',
        PYTHONPATH=':'.join(p for p in paths if p),
    )
    env.setdefault('OMP_NUM_THREADS', '1')
    process = subprocess.Popen(
        [sys.executable, str(HERE / script)],
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    atexit.register(process.kill)
    return process


def report(process, timeout):
    """The report of a started script, once it has finished."""
    stdout, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 0, stderr[-4000:]
    return json.loads(stdout.strip().splitlines()[-1])


def report_fixture(script, timeout, entry=None):
    """A module-scoped fixture giving the report of ``script`` (or its
    ``entry``); the script starts now, as the test module defining the
    fixture is collected."""
    process = start(script)

    @pytest.fixture(scope='module')
    def fixture():
        finished = report(process, timeout)
        return finished if entry is None else finished[entry]

    return fixture


def assert_close(report, rtol):
    """A report's output and every gradient within ``rtol`` of the
    reference's largest magnitude."""
    assert report['out'] <= rtol * report['out_scale'], report
    for name, error in report['grads'].items():
        assert error <= rtol * report['grad_scales'][name], (name, report)
