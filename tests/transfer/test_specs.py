"""Component specs: any component set named as a setting
(``mlpcopy+norms``, ``fullcopy-attn``), parsed in one place."""

import pytest
from tiny_vit import backbone_cfg

from mmlvit.transfer import (
    GROUPS,
    TransferError,
    component_of,
    components_text,
    is_preset,
    spec_policy,
)

EMBEDDINGS = {'patch_embed', 'pos_embed', 'cls_token'}
NORMS = {'norms', 'final_norm'}
ATTENTION = {'attn_qkv', 'attn_proj'}
# The MLPs as MLPCopy copies them: with the layer scales (DeiT III's) and
# the attention-pooling neck (SigLIP's).
MLP = {'mlp', 'layer_scale', 'attn_pool'}
FULL = EMBEDDINGS | NORMS | ATTENTION | MLP
# The leave-one-out grid's settings, restated from the paper's components.
GRID = {
    'random': ('Random', set()),
    'mlpcopy': ('MLPCopy', MLP),
    'mlpcopy+norms': ('MLPCopy', MLP | NORMS),
    'mlpcopy+embeddings': ('MLPCopy', MLP | EMBEDDINGS),
    'fullcopy-attn': ('FullCopy', MLP | NORMS | EMBEDDINGS),
    'fullcopy-mlp': ('FullCopy', FULL - {'mlp'}),
    'fullcopy': ('FullCopy', FULL),
}


@pytest.mark.parametrize('spec', sorted(GRID))
def test_the_grid_settings(spec):
    setting, components = GRID[spec]
    policy = spec_policy(spec)
    assert policy.setting.name == setting
    assert set(policy.components) == components
    assert is_preset(spec) == ('+' not in spec and '-' not in spec)


def test_terms_apply_left_to_right_in_component_order():
    """FullCopy - attention is MLPs + norms + embeddings, however
    spelled; the blocks' norms alone are norms - final_norm."""
    assert (
        spec_policy('mlpcopy+norms+embeddings').components
        == spec_policy('fullcopy-attn').components
        == ('patch_embed', 'pos_embed', 'cls_token', 'norms', 'mlp')
        + ('layer_scale', 'attn_pool', 'final_norm')
    )
    assert spec_policy('random+norms-final_norm').components == ('norms',)
    assert spec_policy('random+head+attn_qkv').components == (
        'attn_qkv',
        'head',
    )
    assert set(GROUPS['norms']) == NORMS


def test_a_setting_with_a_hyphen_is_read_whole():
    """``fullcopy-nocls`` is a setting; ``fullcopy-attn`` is FullCopy
    without attention."""
    policy = spec_policy('fullcopy-nocls-mlp')
    assert policy.setting.name == 'FullCopyNoClsToken'
    assert set(policy.components) == FULL - {'cls_token', 'mlp'}


@pytest.mark.parametrize(
    'spec,message',
    [
        (
            'mlpcopy+norm',
            "Component spec 'mlpcopy+norm': unknown component 'norm'; choose "
            'from embeddings, attn, norms, patch_embed, pos_embed, '
            'cls_token, attn_qkv, attn_proj, mlp, layer_scale, attn_pool, '
            'final_norm, head.',
        ),
        (
            'mlp+norms',
            "Component spec 'mlp+norms' does not start with a setting; start "
            'it with one of random, mimetic, impulse, attncopy, mlpcopy, '
            'fullcopy, fullcopy-nocls, fullcopy-noclspos, fullcopy-noembed, '
            'tttfullcopy.',
        ),
        (
            'mlpcopy+mlp',
            "Component spec 'mlpcopy+mlp': +mlp changes nothing (the set "
            "before it already copies ['mlp']); drop the term.",
        ),
        (
            'random-attn',
            "Component spec 'random-attn': -attn changes nothing (the set "
            "before it does not copy ['attn_proj', 'attn_qkv']); drop the "
            'term.',
        ),
        (
            'fullcopy-attn+',
            "Component spec 'fullcopy-attn+': cannot read '-attn+'; write "
            'terms as +NAME or -NAME with NAME one of embeddings, attn, '
            'norms, patch_embed, pos_embed, cls_token, attn_qkv, attn_proj, '
            'mlp, layer_scale, attn_pool, final_norm, head.',
        ),
        (
            'mimetic+attn',
            "Component spec 'mimetic+attn': Mimetic initialises "
            "['attn_proj', 'attn_qkv'] analytically; do not also copy them.",
        ),
    ],
)
def test_spec_errors_name_the_problem_and_the_choices(spec, message):
    with pytest.raises(TransferError) as err:
        spec_policy(spec)
    assert str(err.value) == message


def test_components_text():
    assert components_text(()) == 'none'
    assert components_text(['mlp', 'norms']) == 'norms mlp'


def test_a_spec_copies_exactly_its_components(init_copy):
    """The policy of ``mlpcopy+norms`` applied to a linear student copies
    the MLPs and every LayerNorm, nothing else (the tiny ViT has no layer
    scales); the report says so."""
    policy = spec_policy('mlpcopy+norms')
    ckpt, fresh, student, report = init_copy(
        backbone_cfg('ReLULinearAttention'),
        policy.setting.name,
        policy.components,
    )
    copied = {k for k in ckpt if component_of(k) in {'mlp'} | NORMS}
    assert set(report.keys('copied')) == copied
    assert (
        "components=['norms', 'mlp', 'layer_scale', 'attn_pool', "
        "'final_norm']" in report.table()
    )
    params = dict(student.named_parameters())
    for key in copied:
        assert params[key].equal(ckpt[key])
    for key in set(params) - copied:
        assert params[key].equal(fresh[key])
