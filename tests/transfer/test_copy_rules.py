"""The copy rules as data: every setting's plan for every registered
operator is the one captured before the rules became a table, and a rule
added to the table changes the plans it matches and no other."""

import json

import pytest
from plan_snapshot import SNAPSHOT, digest, snapshot

EXPECTED = json.load(open(SNAPSHOT))


@pytest.fixture(scope='module')
def plans():
    return snapshot()


def test_every_plan_is_the_captured_one(plans):
    missing = sorted(set(EXPECTED) - set(plans))
    assert not missing, missing
    changed = sorted(k for k in EXPECTED if digest(plans[k]) != EXPECTED[k])
    assert not changed, changed
