"""A distillation loss registered outside mmlvit (here: in a test-only
plugin that also adds what it records) is picked up by the unchanged loss
contract tests, which pass for a correct loss and fail for one that breaks
the contract."""

import re

import test_distill_loss_contract as contract
from plugin_contract import registry_tests, start_with_plugin

TOYS = ('BlockOutputMSE', 'UnweightedBlockOutputMSE')
_CONTRACT_RUN = start_with_plugin(
    'toy_losses', 'BlockOutputMSE', 'test_distill_loss_contract.py'
)


def test_contract_tests_pick_up_a_loss_registered_elsewhere():
    stdout, stderr = _CONTRACT_RUN.communicate(timeout=600)
    results = re.findall(r'::(\w+)\[(\w+)\] (PASSED|FAILED)', stdout + stderr)
    assert results, stdout[-3000:] + stderr[-3000:]
    outcome = {(test, loss): result for test, loss, result in results}
    for toy in TOYS:
        assert {t for t, loss in outcome if loss == toy} == registry_tests(
            contract
        )
    # The correct loss passes all of them ...
    assert all(
        r == 'PASSED' for (t, loss), r in outcome.items() if loss == TOYS[0]
    )
    # ... and the broken one fails where loss_weight is checked, only.
    failed = {t for (t, loss), r in outcome.items() if r == 'FAILED'}
    assert failed == {'test_loss_weight_scales_it'}
    assert _CONTRACT_RUN.returncode == 1
