"""EVA-02 (timm's ``Eva``, tiny/small layout: packed SwiGLU and q/v biases;
base/large layout: q/k/v projections and a SwiGLU with its hidden norm):
timm's own model is the oracle. Read with ``--format auto`` and
``eva02``, copied with FullCopy into LinearVisionTransformer with softmax
attention and RoPE, it computes timm's function to 1e-5; MLPCopy puts its
SwiGLU MLPs into GLA and ReLU students with RoPE; the bad files and an
operator without RoPE are refused with the fix."""

import copy

import pytest
import torch
from mmengine.config import Config
from vit_families import family_classifier, images, read, save_family
from vit_families import timm_model as family_model

from mmlvit.apis import convert_to_student
from mmlvit.checkpoint import CheckpointError
from mmlvit.transfer import COMPONENTS, apply_init, component_of, readers

LAYOUTS = ['eva02', 'eva02-base']


def fullcopy_student(path, format='auto'):
    state = read(path, format)
    model, _ = family_classifier(state, 'SoftmaxAttention')
    report = apply_init(model, state, 'FullCopy', components=COMPONENTS)
    assert report.unused == [] and report.keys('default') == []
    return model.eval()


def assert_same_function(model, timm_model, x):
    with torch.no_grad():
        tokens = timm_model.forward_features(x)
        features = timm_model.forward_head(tokens, pre_logits=True)
        logits = timm_model.forward_head(tokens)
        got = model.extract_feat(x)[-1]
        torch.testing.assert_close(got, features, rtol=0, atol=1e-5)
        torch.testing.assert_close(
            model(x, mode='tensor'), logits, rtol=0, atol=1e-5
        )


@pytest.mark.parametrize('layout', LAYOUTS)
def test_fullcopy_softmax_student_computes_the_timm_model(layout, tmp_path):
    path = save_family(layout, tmp_path / f'{layout}.pth')
    for fmt in ('auto', 'eva02'):
        model = fullcopy_student(path, fmt)
        assert model.backbone.rope is not None
        assert_same_function(model, family_model(layout), images(layout))


def test_rope_follows_another_resolution(tmp_path):
    """70 and 84 px (5 x 5 and 6 x 6 grids for a 4 x 4 table): with the
    learned positions zeroed (their resize is mmpretrain's, not timm's),
    the rotary tables for the new grid give timm's function."""
    timm_model = copy.deepcopy(family_model('eva02'))
    with torch.no_grad():
        timm_model.pos_embed.zero_()
    path = tmp_path / 'eva02.pth'
    torch.save(timm_model.state_dict(), path)
    model = fullcopy_student(path)
    for size in (70, 84):
        assert_same_function(model, timm_model, images('eva02', size=size))


def test_auto_detects_eva02_and_logs_the_zero_key_bias(tmp_path, monkeypatch):
    logged = []
    monkeypatch.setattr(
        readers, 'print_log', lambda msg, **kwargs: logged.append(msg)
    )
    state = read(save_family('eva02', tmp_path / 'e.pth'))
    assert "as a 'eva02' checkpoint" in logged[-1]
    assert 'zero key part' in logged[-1] and 'rope_cfg' in logged[-1]
    timm_state = family_model('eva02').state_dict()
    bias = state['backbone.layers.1.attn.qkv.bias']
    assert torch.equal(bias[:64], timm_state['blocks.1.attn.q_bias'])
    assert not bias[64:128].any()
    assert torch.equal(bias[128:], timm_state['blocks.1.attn.v_bias'])


@pytest.mark.parametrize('layout', LAYOUTS)
@pytest.mark.parametrize(
    'attn', ['GatedLinearAttention', 'ReLULinearAttention']
)
def test_mlpcopy_copies_the_swiglu_into_rope_students(layout, attn, tmp_path):
    state = read(save_family(layout, tmp_path / 'softmax.pth'))
    student, _ = family_classifier(state, attn)
    assert student.backbone.rope is not None
    report = apply_init(student, state, 'MLPCopy')
    expected = {k for k in state if component_of(k) == 'mlp'}
    suffixes = {k.split('.ffn.')[1] for k in expected}
    norm = {'norm.weight', 'norm.bias'} if layout == 'eva02-base' else set()
    assert suffixes == {'w12.weight', 'w12.bias', 'w3.weight', 'w3.bias'} | (
        norm
    )
    assert set(report.keys('copied')) == expected
    params = dict(student.named_parameters())
    for key in expected:
        assert torch.equal(params[key], state[key]), key
    student.eval()
    with torch.no_grad():
        assert student(images(layout), mode='tensor').isfinite().all()


def test_convert_writes_rope_into_student_and_teacher(tmp_path):
    path = save_family('eva02', tmp_path / 'eva02.pth')
    result = convert_to_student(
        str(path), str(tmp_path / 'out'), operator='gla', num_heads=2
    )
    config = Config.fromfile(result['config'])
    for net in ('student', 'teacher'):
        backbone = config.model[net].backbone
        assert backbone.rope_cfg == dict(
            type='eva02', ref_feat_shape=(16, 16)
        ), net
        assert backbone.layer_cfgs.ffn_type == 'swiglu'
        assert backbone.out_type == 'avg_featmap' and not backbone.final_norm


def timm_state(layout='eva02'):
    return dict(family_model(layout).state_dict())


@pytest.mark.parametrize(
    'layout,edit,message',
    [
        (
            'eva02',
            lambda s: s.pop('blocks.1.attn.v_bias'),
            r'resembles EVA-02 but only partly: block blocks\.1 has '
            r".*'blocks\.1\.attn\.q_bias'.* missing "
            r"\['blocks\.1\.attn\.v_bias'\]",
        ),
        (
            'eva02-base',
            lambda s: s.pop('blocks.0.mlp.fc1_x.weight'),
            r"only partly.*missing \['blocks\.0\.mlp\.fc1_x\.weight'\]",
        ),
        (
            'eva02',
            lambda s: s.update({'blocks.0.attn.v_bias': torch.zeros(65)}),
            r'blocks\.0\.attn\.v bias \(65,\) do not fit the width 64',
        ),
        (
            'eva02',
            lambda s: s.update(
                {'blocks.0.mlp.fc1.weight': torch.zeros(170, 64)}
            ),
            r'an MLP of 170 hidden rows for a projection from 170: a SwiGLU '
            'has twice as many',
        ),
    ],
)
def test_bad_eva02_files_are_refused(layout, edit, message):
    state = timm_state(layout)
    edit(state)
    with pytest.raises(CheckpointError, match=message):
        read(state)


def test_a_plain_vit_file_read_as_eva02_names_its_family():
    state = timm_state()
    plain = {k: v for k, v in state.items() if 'q_bias' not in k}
    plain = {k: v for k, v in plain.items() if 'v_bias' not in k}
    with pytest.raises(
        CheckpointError,
        match=r'not a EVA-02 checkpoint.*missing: blocks\.N\.attn\.q_bias',
    ):
        read(plain, 'eva02')


def test_an_operator_without_rope_is_refused_with_the_fix(tmp_path):
    state = read(save_family('eva02', tmp_path / 'e.pth'))
    with pytest.raises(
        ValueError,
        match=r'MHLAttention cannot apply rotary position embedding.*'
        r'GatedLinearAttention.*or drop rope_cfg',
    ):
        family_classifier(state, 'MHLAttention', with_cls_token=False)
