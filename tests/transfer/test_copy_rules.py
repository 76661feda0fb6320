"""The copy rules as data: every setting's plan for every registered
operator is the one captured before the rules became a table, each
built-in rule does what it says tensor by tensor, and a rule added to the
table decides the tensors it matches."""

import json

import pytest
import torch
import torch.nn.functional as F
from plan_snapshot import SNAPSHOT, digest, snapshot
from test_policies import FULL, assert_copied_exactly, in_components
from tiny_vit import TINY_ARCH, backbone_cfg

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


# The built-in rules, tensor by tensor.


def test_ttt_student_takes_standard_qkv_rows_only(init_copy):
    attn = 'TTTAttention'
    ckpt, fresh, student, report = init_copy(backbone_cfg(attn), 'FullCopy')
    C = TINY_ARCH['embed_dims']
    params = dict(student.named_parameters())
    for i in range(TINY_ARCH['num_layers']):
        for kind in ('weight', 'bias'):
            key = f'backbone.layers.{i}.attn.qkv.{kind}'
            assert params[key].shape[0] == 3 * C + 3 * (C // 2)
            assert torch.equal(params[key][: 3 * C], ckpt[key])
            assert torch.equal(params[key][3 * C :], fresh[key][3 * C :])
            # The wider proj keeps its own init, bias included.
            key = f'backbone.layers.{i}.attn.proj.{kind}'
            assert torch.equal(params[key], fresh[key])
        for inner in ('w1', 'w2', 'w3'):
            key = f'backbone.layers.{i}.attn.{inner}'
            assert torch.equal(params[key], fresh[key])
    copied = {
        k
        for k in ckpt
        if in_components(k, FULL - {'attn_qkv', 'attn_proj'}) and k in params
    }
    copied_whole = copied | {k for k in params if '.attn.qkv.' in k}
    for key, param in params.items():
        if key not in copied_whole:
            assert torch.equal(param, fresh[key]), key
        elif key in copied:
            assert torch.equal(param, ckpt[key]), key
    skipped = dict(
        (r.key, r.reason) for r in report.records if r.action == 'skipped'
    )
    assert 'no class token' in skipped['backbone.cls_token']
    assert 'sin-cos' in skipped['backbone.pos_embed']
    assert 'wider' in skipped['backbone.layers.0.attn.proj.weight']
    assert 'wider' in skipped['backbone.layers.0.attn.proj.bias']
    table = report.table()
    assert 'operator-specific extra rows 96:144' in table
    assert 'the student has no class token' in table


def test_mhla_extra_parameters_keep_their_init(init_copy):
    attn = 'MHLAttention'
    ckpt, fresh, student, _ = init_copy(backbone_cfg(attn), 'FullCopy')
    params = dict(student.named_parameters())
    copied = {k for k in ckpt if in_components(k, FULL) and k in params}
    assert {
        'backbone.layers.0.attn.mixing',
        'backbone.layers.0.attn.lepe.weight',
    } <= set(params) - copied
    assert_copied_exactly(student, fresh, ckpt, copied)


def test_pos_embed_resized_and_class_row_dropped(
    build_classifier, softmax_state
):
    ckpt = softmax_state()  # 4x4 grid + class token
    grid = ckpt['backbone.pos_embed'][:, 1:].reshape(1, 4, 4, -1)
    resized = F.interpolate(
        grid.permute(0, 3, 1, 2),
        size=(6, 6),
        mode='bicubic',
        align_corners=False,
    )
    resized = resized.flatten(2).transpose(1, 2)

    student = build_classifier(
        backbone_cfg('ReLULinearAttention', img_size=48)
    )
    report = apply_init(student, ckpt, components=['pos_embed'])
    pos = student.backbone.pos_embed
    assert pos.shape == (1, 37, 32)
    assert torch.equal(pos[:, :1], ckpt['backbone.pos_embed'][:, :1])
    torch.testing.assert_close(pos[:, 1:], resized)
    assert 'resized from (1, 17, 32)' in report.table()

    no_cls = build_classifier(
        backbone_cfg(
            'ReLULinearAttention', with_cls_token=False, out_type='avg_featmap'
        )
    )
    report = apply_init(no_cls, ckpt, 'FullCopy')
    assert torch.equal(
        no_cls.backbone.pos_embed, ckpt['backbone.pos_embed'][:, 1:]
    )
    assert 'backbone.cls_token' in [
        r.key for r in report.records if r.action == 'skipped'
    ]


def test_class_token_student_needs_a_class_position(
    build_classifier, softmax_state
):
    ckpt = softmax_state(with_cls_token=False, out_type='avg_featmap')
    student = build_classifier(backbone_cfg('ReLULinearAttention'))
    before = student.backbone.pos_embed.clone()
    with pytest.raises(TransferError, match='no class-token position'):
        apply_init(student, ckpt, components=['pos_embed'])
    assert torch.equal(student.backbone.pos_embed, before)


# A rule added to the table.


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
        'extra head qkv rows',
        'extra head proj columns',
        'operator-specific proj',
        'same shape',
        'standard qkv rows',
        'resized pos_embed',
    ]
