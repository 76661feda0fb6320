"""An operator registered outside mmlvit (here: in a test-only module) is
picked up by the unchanged contract tests, which pass for a correct
operator and fail for one that breaks the contract."""

import re
import subprocess

import test_attention_common as contract
from plugin_contract import registry_tests, start_with_plugin

_CONTRACT_RUN = start_with_plugin(
    'toy_operators',
    'MeanPoolAttention or WrongShapeAttention',
    'test_attention_common.py',
)


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
    contract_tests = registry_tests(contract)
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
