"""A script of this folder run under Triton's interpreter in a fresh
process, on CPU only (TRITON_INTERPRET is read when triton imports).

A test module starts it when it is collected, so that its single-threaded
work overlaps the rest of the suite (under pytest-xdist, when a worker
first needs it); it is killed at exit if no test read it. Its report is
the JSON of its last line of output.
"""

import atexit
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tool_runs import interpreter_env

HERE = Path(__file__).parent


def start(script):
    """Start ``script`` (a file of this folder); returns the process."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / script)],
        cwd=HERE,
        env=interpreter_env(),
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


def starter(script):
    """A function giving the process of ``script``, started once. In one
    pytest process the script starts now (as the test module calling this
    is collected). Under pytest-xdist every worker collects every module,
    also the modules its tests deselect, so there it starts at the first
    call (``make test`` keeps a module's tests on one worker: ``--dist
    loadscope``)."""
    process = None if os.environ.get('PYTEST_XDIST_WORKER') else start(script)

    def started():
        nonlocal process
        if process is None:
            process = start(script)
        return process

    return started


def report_fixture(script, timeout, entry=None):
    """A module-scoped fixture giving the report of ``script`` (or its
    ``entry``), started by :func:`starter`."""
    process = starter(script)

    @pytest.fixture(scope='module')
    def fixture():
        finished = report(process(), timeout)
        return finished if entry is None else finished[entry]

    return fixture


def dtype_cases(report, bounds, key='cases'):
    """The report's ``key`` cases, which must cover exactly the dtypes
    that ``bounds`` (relative-error bounds by dtype name) has."""
    cases = report[key]
    assert {c['dtype'] for c in cases} == set(bounds)
    return cases


def assert_within(case, bound):
    """A case's output and every gradient within relative error ``bound``
    of the reference."""
    assert case['out'] < bound, case
    for name, error in case['grads'].items():
        assert error < bound, (name, case)


def assert_close(report, rtol):
    """A report's output and every gradient within ``rtol`` of the
    reference's largest magnitude."""
    assert report['out'] <= rtol * report['out_scale'], report
    for name, error in report['grads'].items():
        assert error <= rtol * report['grad_scales'][name], (name, report)
