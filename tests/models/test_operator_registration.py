"""An operator registered outside mmlvit (here: in a test-only module) is
picked up by the unchanged contract tests, which pass for a correct
operator and fail for one that breaks the contract."""

import atexit
import os
import re
import subprocess
import sys
from pathlib import Path

import test_attention_common as contract

HERE = Path(__file__).parent


def _start_contract_tests():
    """The contract tests with the toy operators registered by a plugin,
    in a fresh pytest process. Started when this module is collected so
    that it overlaps the rest of the suite; killed at exit if unread."""
    env = dict(os.environ, PYTHONPATH=str(HERE), OMP_NUM_THREADS='1')
    process = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'pytest',
            '-p',
            'toy_operators',
            '-v',
            '-p',
            'no:cacheprovider',
            '-k',
            'MeanPoolAttention or WrongShapeAttention',
            str(HERE / 'test_attention_common.py'),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=HERE.parent.parent,
    )
    atexit.register(process.kill)
    return process


_CONTRACT_RUN = _start_contract_tests()


def test_contract_tests_pick_up_an_operator_registered_elsewhere():
    stdout, stderr = _CONTRACT_RUN.communicate(timeout=600)
    run = subprocess.CompletedProcess(
        _CONTRACT_RUN.args, _CONTRACT_RUN.returncode, stdout, stderr
    )
    results = re.findall(
        r'::(\w+)\[([^\]]*)\] (PASSED|FAILED)', run.stdout + run.stderr
    )
    assert results, run.stdout[-3000:] + run.stderr[-3000:]
    outcome = {}
    for test, params, result in results:
        operator = re.search(r'(MeanPool|WrongShape)Attention', params)
        if operator:
            outcome.setdefault((test, operator.group(0)), set()).add(result)
    # Every contract test parametrised over the registry ran for both.
    contract_tests = {
        name
        for name, fn in vars(contract).items()
        if name.startswith('test_')
        and any(
            mark.name == 'parametrize' and mark.args[0] == 'name'
            for mark in getattr(fn, 'pytestmark', [])
        )
    }
    assert {t for t, op in outcome if op == 'MeanPoolAttention'} == (
        contract_tests
    )
    assert {t for t, op in outcome if op == 'WrongShapeAttention'} == (
        contract_tests
    )
    # The correct operator passes all of them ...
    assert all(
        r == {'PASSED'} for (t, op), r in outcome.items() if op[0] == 'M'
    )
    # ... and the broken one fails where its output shape is checked.
    assert (
        'FAILED'
        in outcome[('test_tokens_in_tokens_out', 'WrongShapeAttention')]
    )
    assert run.returncode == 1
