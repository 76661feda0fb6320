"""The copy rules as data: every setting's plan for every registered
operator is the one captured before the rules became a table, and a rule
added to the table changes the plans it matches and no other."""

import json

import pytest
import torch
from plan_snapshot import SNAPSHOT, digest, snapshot
from transfer_helpers import TINY_ARCH, backbone_cfg

from mmlvit.transfer import TransferError, apply_init
from mmlvit.transfer.copy_rules import COPY_RULES, CopyRule, copy_into

EXPECTED = json.load(open(SNAPSHOT))


@pytest.fixture(scope='module')
def plans():
    return snapshot()


def test_every_plan_is_the_captured_one(plans):
    missing = sorted(set(EXPECTED) - set(plans))
    assert not missing, missing
    changed = sorted(k for k in EXPECTED if digest(plans[k]) != EXPECTED[k])
    assert not changed, changed


def _fits_inside(tensor):
    """The checkpoint tensor fits in the leading corner of the student's."""
    src, param = tensor.src.shape, tensor.param.shape
    return len(src) == len(param) and all(s <= p for s, p in zip(src, param))


def _copy_leading_block(tensor):
    corner = tuple(slice(0, n) for n in tensor.src.shape)
    return [copy_into(tensor.param[corner], tensor.src)], [
        tensor.record('copied', tensor.src.numel(), 'leading block')
    ]


# A rule a plugin could add: a wider MLP starts from the softmax MLP in its
# leading block (the rest keeps its default init).
LEADING_BLOCK = CopyRule(
    'leading block of a wider MLP',
    _fits_inside,
    _copy_leading_block,
    component='mlp',
)


@pytest.fixture
def leading_block_rule():
    COPY_RULES.append(LEADING_BLOCK)
    yield LEADING_BLOCK
    COPY_RULES.remove(LEADING_BLOCK)


def test_a_rule_added_to_the_table_decides_what_it_matches(
    build_classifier, softmax_state, leading_block_rule
):
    wide = dict(TINY_ARCH, feedforward_channels=96)
    state = softmax_state()
    student = build_classifier(backbone_cfg('ReLULinearAttention', arch=wide))
    fresh = {k: v.clone() for k, v in student.state_dict().items()}
    report = apply_init(student, state, 'MLPCopy')
    for key in report.keys('copied'):
        assert '.ffn.' in key
        src, param = state[key], student.state_dict()[key]
        corner = tuple(slice(0, n) for n in src.shape)
        assert torch.equal(param[corner], src), key
        rest = param.clone()
        rest[corner] = fresh[key][corner]
        assert torch.equal(rest, fresh[key]), key
    # 2 blocks x 2 Linear x (weight, bias); fc2's bias (C,) has the
    # softmax shape and is copied by the built-in same-shape rule.
    reasons = [r.reason for r in report.records if r.action == 'copied']
    assert sorted(reasons) == [''] * 2 + ['leading block'] * 6

    # Without the rule the same init is a shape mismatch.
    COPY_RULES.remove(leading_block_rule)
    try:
        with pytest.raises(TransferError, match='do not match the student'):
            apply_init(student, state, 'MLPCopy')
    finally:
        COPY_RULES.append(leading_block_rule)


def test_the_built_in_rules_in_order():
    assert [r.name for r in COPY_RULES] == [
        'operator-specific proj',
        'same shape',
        'standard qkv rows',
        'resized pos_embed',
    ]
