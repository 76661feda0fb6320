"""Copy policies, tensor by tensor: exactly the intended parameters come from
the checkpoint, every other one keeps its fresh init."""

import re

import pytest
import torch
from tiny_vit import TINY_ARCH, backbone_cfg

from mmlvit.transfer import (
    SETTINGS,
    TransferError,
    apply_init,
    get_setting,
    setting_names,
)

# The paper's settings table, restated independently of mmlvit's own.
FULL = set(
    'patch_embed pos_embed cls_token norms attn_qkv attn_proj mlp '
    'layer_scale attn_pool final_norm'.split()
)
# Layer scales (DeiT III) and the attention-pooling neck (SigLIP) go with
# every copying setting: the paper's ViTs have neither, so its table is
# unchanged for them.
PAPER_TABLE = {
    'Random': set(),
    'Copy': {'attn_qkv', 'attn_proj', 'layer_scale', 'attn_pool'},
    'MLPCopy': {'mlp', 'layer_scale', 'attn_pool'},
    'FullCopy': FULL,
    'Variant1': FULL - {'cls_token'},
    'Variant2': FULL - {'cls_token', 'pos_embed'},
    'Variant3': FULL - {'cls_token', 'pos_embed', 'patch_embed'},
}
# The paper's variants under names that say what they leave out.
VARIANT_NAMES = {
    'Variant1': 'FullCopyNoClsToken',
    'Variant2': 'FullCopyNoClsTokenPosEmbed',
    'Variant3': 'FullCopyNoEmbeddings',
}
KEY_PATTERNS = {
    'patch_embed': r'backbone\.patch_embed\.projection\.(weight|bias)',
    'pos_embed': r'backbone\.pos_embed',
    'cls_token': r'backbone\.cls_token',
    'norms': r'backbone\.layers\.\d+\.ln[12]\.(weight|bias)',
    'attn_qkv': r'backbone\.layers\.\d+\.attn\.qkv\.(weight|bias)',
    'attn_proj': r'backbone\.layers\.\d+\.attn\.proj\.(weight|bias)',
    'mlp': r'backbone\.layers\.\d+\.ffn\.layers\.(0\.0|1)\.(weight|bias)',
    'layer_scale': r'backbone\.layers\.\d+\.(attn\.gamma1|ffn\.gamma2)\.'
    r'weight',
    'attn_pool': r'neck\.(latent|(q|kv|proj|norm|mlp\.fc[12])\.(weight|bias))',
    'final_norm': r'backbone\.ln1\.(weight|bias)',
    'head': r'head\.layers\.head\.(weight|bias)',
}


def in_components(key, components):
    return any(re.fullmatch(KEY_PATTERNS[c], key) for c in components)


def assert_copied_exactly(model, fresh, ckpt, copied_keys):
    """Every parameter in ``copied_keys`` equals the checkpoint's, every
    other one its fresh init; both sets are checked to be distinguishable."""
    for key, param in model.named_parameters():
        reference = ckpt[key] if key in copied_keys else fresh[key]
        assert torch.equal(param, reference), key
        if key in ckpt and key not in copied_keys:
            assert not torch.equal(param, ckpt[key]), key


def test_settings_match_the_paper_table():
    # Beyond the paper: the analytical inits and TTT full inheritance
    # (test_ttt_inheritance.py).
    beyond = {'Mimetic', 'Impulse', 'TTTFullCopy'}
    assert set(setting_names()) == (
        set(PAPER_TABLE) | set(VARIANT_NAMES.values()) | beyond
    )
    for name, components in PAPER_TABLE.items():
        assert set(get_setting(name).components) == components, name
    for alias, name in VARIANT_NAMES.items():
        assert get_setting(alias) is SETTINGS[name]
    for name in ('Mimetic', 'Impulse'):
        assert SETTINGS[name].components == ()
        assert SETTINGS[name].analytical is not None
    short_names = [s.short_name for s in SETTINGS.values()]
    assert len(set(short_names)) == len(short_names)


def test_unknown_setting_lists_names_and_aliases():
    with pytest.raises(TransferError, match=r'FullCopyNoClsToken \(Variant1'):
        get_setting('Variant4')


def test_an_alias_reports_the_setting_it_names(
    build_classifier, softmax_state
):
    report = apply_init(
        build_classifier(backbone_cfg(None)), softmax_state(), 'Variant3'
    )
    assert report.policy.setting.name == 'FullCopyNoEmbeddings'
    assert 'setting=FullCopyNoEmbeddings' in report.table()


@pytest.mark.parametrize('setting', sorted(PAPER_TABLE))
@pytest.mark.parametrize('attn', [None, 'ReLULinearAttention'])
def test_copy_settings_tensor_by_tensor(setting, attn, init_copy):
    ckpt, fresh, student, report = init_copy(backbone_cfg(attn), setting)
    copied = {k for k in ckpt if in_components(k, PAPER_TABLE[setting])}
    assert_copied_exactly(student, fresh, ckpt, copied)
    assert set(report.keys('copied')) == copied
    assert set(report.unused) == set(ckpt) - copied


def test_custom_components_and_head(init_copy):
    ckpt, fresh, student, _ = init_copy(
        backbone_cfg(), components=['head', 'final_norm', 'norms']
    )
    copied = {
        k for k in ckpt if in_components(k, ['head', 'final_norm', 'norms'])
    }
    assert_copied_exactly(student, fresh, ckpt, copied)


def test_hybrid_softmax_blocks_copy_their_attention(
    build_classifier, init_copy
):
    """copy_softmax_attention: the softmax block of a hybrid student takes
    the teacher's attention weights on top of the setting (MLPCopy); the
    linear block's attention keeps its fresh init."""
    hybrid = backbone_cfg(
        'GatedLinearAttention',
        attn_cfg=[
            dict(type='GatedLinearAttention'),
            dict(type='SoftmaxAttention'),
        ],
    )
    ckpt, fresh, student, report = init_copy(
        hybrid, 'MLPCopy', copy_softmax_attention=True
    )
    copied = {
        k
        for k in ckpt
        if in_components(k, ['mlp'])
        or re.fullmatch(r'backbone\.layers\.1\.attn\.(qkv|proj)\..*', k)
    }
    assert_copied_exactly(student, fresh, ckpt, copied)
    assert set(report.keys('copied')) == copied

    plain = build_classifier(hybrid)
    apply_init(plain, ckpt, 'MLPCopy')
    assert_copied_exactly(
        plain, fresh, ckpt, {k for k in ckpt if in_components(k, ['mlp'])}
    )


def test_backbone_alone_is_accepted(build_classifier, softmax_state):
    ckpt = softmax_state()
    student = build_classifier(backbone_cfg('ELULinearAttention'))
    fresh = dict(
        build_classifier(backbone_cfg('ELULinearAttention')).named_parameters()
    )
    apply_init(student.backbone, ckpt, 'MLPCopy')
    copied = {k for k in ckpt if in_components(k, ['mlp'])}
    assert_copied_exactly(student, fresh, ckpt, copied)
    with pytest.raises(
        TransferError, match='head component needs the classifier'
    ):
        apply_init(student.backbone, ckpt, components=['head'])


def test_width_mismatch_lists_keys_and_writes_nothing(
    build_classifier, softmax_state
):
    wide = dict(
        embed_dims=48, num_layers=2, num_heads=2, feedforward_channels=96
    )
    ckpt = softmax_state(arch=wide)
    student = build_classifier(backbone_cfg('ReLULinearAttention'))
    before = {k: v.clone() for k, v in student.state_dict().items()}
    with pytest.raises(TransferError) as err:
        apply_init(student, ckpt, 'FullCopy')
    message = str(err.value)
    assert 'do not match the student in shape' in message
    assert (
        'backbone.patch_embed.projection.weight: checkpoint '
        '(48, 1, 8, 8) vs student (32, 1, 8, 8)'
    ) in message
    with pytest.raises(
        TransferError,
        match=r'backbone\.layers\.0\.ffn\.layers\.0\.0\.weight:'
        r' checkpoint \(96, 48\) vs student \(64, 32\)',
    ):
        apply_init(student, ckpt, 'MLPCopy')
    for key, value in student.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_depth_mismatch_is_reported_not_fatal(build_classifier, softmax_state):
    deep = dict(TINY_ARCH, num_layers=3)
    ckpt = softmax_state(arch=deep)
    student = build_classifier(backbone_cfg('ReLULinearAttention'))
    report = apply_init(student, ckpt, 'MLPCopy')
    orphans = [k for k in report.unused if k.startswith('backbone.layers.2.')]
    assert 'backbone.layers.2.ffn.layers.1.weight' in orphans
    assert (
        "no counterpart in the student: ['backbone.layers.2." in report.table()
    )

    shallow = softmax_state()
    deep_student = build_classifier(
        backbone_cfg('ReLULinearAttention', arch=deep)
    )
    fresh = dict(
        build_classifier(
            backbone_cfg('ReLULinearAttention', arch=deep)
        ).named_parameters()
    )
    report = apply_init(deep_student, shallow, 'MLPCopy')
    assert_copied_exactly(
        deep_student,
        fresh,
        shallow,
        {k for k in shallow if in_components(k, ['mlp'])},
    )
    assert (
        'backbone.layers.2.ffn.layers.1.weight: not in checkpoint'
        in report.table()
    )


def test_missing_component_in_checkpoint(build_classifier, softmax_state):
    ckpt = {
        k: v for k, v in softmax_state().items() if not k.startswith('head.')
    }
    student = build_classifier(backbone_cfg())
    with pytest.raises(
        TransferError,
        match=r'no tensors for the requested '
        r"components \['head'\]",
    ):
        apply_init(student, ckpt, components=['head', 'mlp'])


@pytest.mark.parametrize(
    'setting, components, message',
    [
        ('Linear', None, 'Unknown init setting'),
        ('MLPCopy', ['mlps'], r"Unknown components \['mlps'\]"),
        ('MLPCopy', 'mlp', 'must be a list'),
        ('Mimetic', ['attn_qkv', 'mlp'], r"do not also copy \['attn_qkv'\]"),
        ('Impulse', ['pos_embed'], r"do not also copy \['pos_embed'\]"),
    ],
)
def test_policy_errors(
    setting, components, message, build_classifier, softmax_state
):
    student = build_classifier(backbone_cfg())
    with pytest.raises(TransferError, match=message):
        apply_init(student, softmax_state(), setting, components)


def test_analytical_setting_with_copied_mlp(init_copy):
    ckpt, fresh, student, report = init_copy(
        backbone_cfg(), 'Mimetic', components=['mlp']
    )
    params = dict(student.named_parameters())
    for key in params:
        if in_components(key, ['mlp']):
            assert torch.equal(params[key], ckpt[key])
        elif in_components(key, ['attn_qkv', 'attn_proj']):
            assert not torch.equal(params[key], fresh[key])
            assert key in report.keys('analytical')
        else:
            assert torch.equal(params[key], fresh[key])


def registered_operators():
    from mmpretrain.registry import MODELS

    from mmlvit.models.attentions import BaseAttention

    return sorted(
        name
        for name, cls in MODELS.module_dict.items()
        if isinstance(cls, type) and issubclass(cls, BaseAttention)
    )


@pytest.mark.parametrize('attn', registered_operators())
def test_fullcopy_into_every_registered_operator(attn, init_copy):
    """Operator-agnostic copy: same-shaped tensors copied, wider qkv takes
    its standard rows, everything else (operator extras) keeps its init."""
    ckpt, fresh, student, _ = init_copy(backbone_cfg(attn), 'FullCopy')
    wide_proj = any(
        k.endswith('attn.proj.weight') and v.shape != ckpt[k].shape
        for k, v in fresh.items()
    )
    for key, param in student.named_parameters():
        src = ckpt.get(key) if in_components(key, FULL) else None
        if src is not None and src.shape == param.shape:
            expected = fresh[key] if wide_proj and '.proj.' in key else src
            assert torch.equal(param, expected), key
        elif src is not None and '.attn.qkv.' in key:
            assert torch.equal(param[: len(src)], src), key
            assert torch.equal(param[len(src) :], fresh[key][len(src) :])
        else:
            assert torch.equal(param, fresh[key]), key
    student(torch.randn(2, 1, 32, 32), mode='tensor')
