"""TTTFullCopy, tensor by tensor: a TTT student takes FullCopy's tensors,
its extra head's q, k, v rows from softmax head 0 and the softmax proj in
its first C input columns; its inner models keep their init; every other
operator is initialised exactly as by FullCopy."""

import pytest
import torch
from tiny_vit import TINY_ARCH, backbone_cfg

from mmlvit.models.attentions import TTTAttention, registered_operators
from mmlvit.transfer import apply_init, get_setting
from mmlvit.transfer.ttt_inheritance import SETTING, SOURCE_HEAD

C = TINY_ARCH['embed_dims']
D = C // TINY_ARCH['num_heads']
TTT = 'TTTAttention'


def initialised(build_classifier, ckpt, attn, setting):
    """(fresh parameters, initialised parameters, report) of one student."""
    fresh = dict(build_classifier(backbone_cfg(attn)).named_parameters())
    student = build_classifier(backbone_cfg(attn))
    report = apply_init(student, ckpt, setting)
    return fresh, dict(student.named_parameters()), report


def test_the_setting_is_full_copy_plus_its_rules():
    assert SETTING == 'TTTFullCopy'
    assert (
        get_setting(SETTING).components == get_setting('FullCopy').components
    )


def test_ttt_takes_the_extra_head_and_proj_from_the_softmax_block(
    build_classifier, softmax_state
):
    ckpt = softmax_state()
    fresh, params, report = initialised(build_classifier, ckpt, TTT, SETTING)
    head = slice(SOURCE_HEAD * D, (SOURCE_HEAD + 1) * D)
    for i in range(TINY_ARCH['num_layers']):
        prefix = f'backbone.layers.{i}.attn.'
        for kind in ('weight', 'bias'):
            qkv, src = (
                params[f'{prefix}qkv.{kind}'],
                ckpt[f'{prefix}qkv.{kind}'],
            )
            assert qkv.shape[0] == 3 * C + 3 * D
            assert torch.equal(qkv[: 3 * C], src)
            q, k, v = src.split(C)
            extra = qkv[3 * C :].split(D)
            for inherited, softmax in zip(extra, (q[head], k[head], v[head])):
                assert torch.equal(inherited, softmax)
        proj = params[f'{prefix}proj.weight']
        assert proj.shape == (C, C + D)
        assert torch.equal(proj[:, :C], ckpt[f'{prefix}proj.weight'])
        # The columns reading the extra head keep their init.
        assert torch.equal(proj[:, C:], fresh[f'{prefix}proj.weight'][:, C:])
        assert torch.equal(
            params[f'{prefix}proj.bias'], ckpt[f'{prefix}proj.bias']
        )
        for inner in ('w1', 'w2', 'w3'):
            key = prefix + inner
            assert torch.equal(params[key], fresh[key]), key
    # Everything outside the attention is FullCopy's.
    _, full, _ = initialised(build_classifier, ckpt, TTT, 'FullCopy')
    for key, param in params.items():
        if '.attn.' not in key:
            assert torch.equal(param, full[key]), key
    reasons = {(r.key, r.action): r.reason for r in report.records}
    assert reasons['backbone.layers.0.attn.qkv.weight', 'copied'] == (
        'rows 0:96 of 144; extra head rows 96:144 from softmax head 0 '
        '(q, k, v rows 0:16, 32:48, 64:80)'
    )
    assert reasons['backbone.layers.0.attn.proj.weight', 'default'] == (
        'extra head columns 32:48 (its output)'
    )
    assert 'backbone.layers.1.attn.proj.bias' in report.keys('copied')
    assert not any(
        r.action == 'skipped' and '.attn.' in r.key for r in report.records
    )
    assert not any('.attn.' in key for key in report.unused)


@pytest.mark.parametrize('setting', ['Copy', 'FullCopy'])
def test_other_settings_leave_the_extra_head_at_its_init(
    setting, build_classifier, softmax_state
):
    ckpt = softmax_state()
    fresh, params, _ = initialised(build_classifier, ckpt, TTT, setting)
    key = 'backbone.layers.0.attn.'
    qkv = params[key + 'qkv.weight']
    assert torch.equal(qkv[3 * C :], fresh[key + 'qkv.weight'][3 * C :])
    for kind in ('weight', 'bias'):
        assert torch.equal(
            params[f'{key}proj.{kind}'], fresh[f'{key}proj.{kind}']
        )


OTHERS = [
    n for n, cls in registered_operators().items() if cls is not TTTAttention
]


@pytest.mark.parametrize('attn', [None, *OTHERS])
def test_other_operators_are_initialised_as_by_full_copy(
    attn, build_classifier, softmax_state
):
    ckpt = softmax_state()
    _, ours, report = initialised(build_classifier, ckpt, attn, SETTING)
    _, full, full_report = initialised(
        build_classifier, ckpt, attn, 'FullCopy'
    )
    for key, param in ours.items():
        assert torch.equal(param, full[key]), key
    assert report.records == full_report.records
    assert report.unused == full_report.unused


def test_the_initialised_student_runs(build_classifier, softmax_state):
    student = build_classifier(backbone_cfg(TTT))
    apply_init(student, softmax_state(), SETTING)
    logits = student(torch.randn(2, 1, 32, 32), mode='tensor')
    assert logits.shape == (2, 10) and torch.isfinite(logits).all()
