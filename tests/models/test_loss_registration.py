"""A distillation loss registered outside mmlvit (here: in a test-only
plugin that also adds what it records) is picked up by the unchanged loss
contract tests, which pass for a correct loss and fail for one that breaks
the contract."""

import atexit
import os
import re
import subprocess
import sys
from pathlib import Path

import test_distill_loss_contract as contract

HERE = Path(__file__).parent
TOYS = ('BlockOutputMSE', 'UnweightedBlockOutputMSE')


def _start_contract_tests():
    """The contract tests with the toy losses registered by a plugin, in a
    fresh pytest process, started at collection so that it overlaps the
    rest of the suite; killed at exit if unread."""
    env = dict(os.environ, PYTHONPATH=str(HERE), OMP_NUM_THREADS='1')
    process = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'pytest',
            '-p',
            'toy_losses',
            '-v',
            '-p',
            'no:cacheprovider',
            '-k',
            'BlockOutputMSE',
            str(HERE / 'test_distill_loss_contract.py'),
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


def test_contract_tests_pick_up_a_loss_registered_elsewhere():
    stdout, stderr = _CONTRACT_RUN.communicate(timeout=600)
    results = re.findall(r'::(\w+)\[(\w+)\] (PASSED|FAILED)', stdout + stderr)
    assert results, stdout[-3000:] + stderr[-3000:]
    outcome = {(test, loss): result for test, loss, result in results}
    contract_tests = {
        name
        for name, fn in vars(contract).items()
        if name.startswith('test_')
        and any(
            mark.name == 'parametrize' and mark.args[0] == 'name'
            for mark in getattr(fn, 'pytestmark', [])
        )
    }
    for toy in TOYS:
        assert {t for t, loss in outcome if loss == toy} == contract_tests
    # The correct loss passes all of them ...
    assert all(
        r == 'PASSED' for (t, loss), r in outcome.items() if loss == TOYS[0]
    )
    # ... and the broken one fails where loss_weight is checked, only.
    failed = {t for (t, loss), r in outcome.items() if r == 'FAILED'}
    assert failed == {'test_loss_weight_scales_it'}
    assert _CONTRACT_RUN.returncode == 1
