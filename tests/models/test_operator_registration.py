"""An operator registered outside mmlvit (here: in a test-only module) is
picked up by the unchanged contract tests, which pass for a correct
operator and fail for one that breaks the contract."""

import os
import re
import subprocess
import sys
from pathlib import Path

import test_attention_common as contract

HERE = Path(__file__).parent


def test_contract_tests_pick_up_an_operator_registered_elsewhere():
    env = dict(os.environ, PYTHONPATH=str(HERE), OMP_NUM_THREADS='1')
    run = subprocess.run(
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
        capture_output=True,
        text=True,
        env=env,
        cwd=HERE.parent.parent,
        timeout=600,
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
