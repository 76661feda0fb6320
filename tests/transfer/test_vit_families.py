"""DeiT III, distilled DeiT and CLIP (timm's and OpenAI's layouts): timm's
own model is the oracle. Read with ``--format auto`` and by name, copied
with FullCopy into LinearVisionTransformer with softmax attention, it
computes timm's function to 1e-5; MLPCopy puts its MLPs and layer scales
into GLA and ReLU students, and the copy report lists them."""

import pytest
import torch
from mmengine.config import Config
from vit_families import (
    IMAGES,
    family_classifier,
    read,
    save_family,
    timm_model,
)

from mmlvit.apis import convert_to_student
from mmlvit.checkpoint import load_checkpoint_file
from mmlvit.transfer import COMPONENTS, apply_init, component_of, readers

CASES = [
    ('deit3', 'timm', 'deit3'),
    ('deit3', 'official', 'deit3'),
    ('deit-distilled', 'timm', 'deit-distilled'),
    ('clip', 'timm', 'clip'),
    ('clip', 'openai', 'openai-clip'),
]


def timm_outputs(family, layout):
    """(logits, pre-logit features) of timm's model on IMAGES; without the
    head bias for the OpenAI layout (CLIP's projection has none)."""
    model = timm_model(family)
    with torch.no_grad():
        tokens = model.forward_features(IMAGES)
        features = model.forward_head(tokens, pre_logits=True)
        logits = model.forward_head(tokens)
    if layout == 'openai':
        logits = logits - model.head.bias
    return logits, features


@pytest.mark.parametrize('family,layout,format', CASES)
def test_fullcopy_softmax_student_computes_the_timm_model(
    family, layout, format, tmp_path
):
    path = save_family(family, tmp_path / f'{family}.pth', layout)
    for fmt in ('auto', format):
        state = read(path, fmt)
        model, _ = family_classifier(state, 'SoftmaxAttention')
        report = apply_init(model, state, 'FullCopy', components=COMPONENTS)
        assert report.unused == [] and report.keys('default') == []
        model.eval()
        logits, features = timm_outputs(family, layout)
        with torch.no_grad():
            got = model.extract_feat(IMAGES)[-1]
            if isinstance(got, tuple):  # class and distillation tokens
                got = (got[0] + got[1]) / 2
            torch.testing.assert_close(got, features, rtol=0, atol=1e-5)
            torch.testing.assert_close(
                model(IMAGES, mode='tensor'), logits, rtol=0, atol=1e-5
            )


def test_auto_detects_each_family_and_logs_its_rule(tmp_path, monkeypatch):
    logged = []
    monkeypatch.setattr(
        readers, 'print_log', lambda msg, **kwargs: logged.append(msg)
    )
    for family, layout, format in CASES:
        read(save_family(family, tmp_path / f'{family}-{layout}.pth', layout))
        # DeiT III's official file is in the DeiT release's layout.
        detected = 'deit' if layout == 'official' else format
        assert f"as a '{detected}' checkpoint" in logged[-1]
    deit3, official, distilled, clip, openai = logged
    for text in (deit3, official):
        assert 'DeiT III: layer scales -> layers.N.attn.gamma1' in text
    assert 'the distillation token is carried' in distilled
    assert 'QuickGELU' in clip and 'dropped' not in clip
    # OpenAI's file: the text tower is dropped, and said so.
    assert 'dropped what the classifier does not use: token_embedding' in (
        openai
    )


@pytest.mark.parametrize('family', ['deit3', 'deit-distilled', 'clip'])
@pytest.mark.parametrize(
    'attn', ['GatedLinearAttention', 'ReLULinearAttention']
)
def test_mlpcopy_copies_mlps_and_layer_scales(family, attn, tmp_path):
    state = read(save_family(family, tmp_path / 'softmax.pth'))
    student, _ = family_classifier(state, attn)
    report = apply_init(student, state, 'MLPCopy')
    expected = {k for k in state if component_of(k) in ('mlp', 'layer_scale')}
    scales = {k for k in state if component_of(k) == 'layer_scale'}
    assert len(scales) == (4 if family == 'deit3' else 0)
    assert {
        'backbone.layers.1.attn.gamma1.weight',
        'backbone.layers.1.ffn.gamma2.weight',
    } <= scales or family != 'deit3'
    assert set(report.keys('copied')) == expected
    params = dict(student.named_parameters())
    for key in expected:
        assert torch.equal(params[key], state[key]), key
    table = report.table()
    assert ('layer_scale  4 / 256' in table) == (family == 'deit3'), table
    # The tokens, norms and attention stay at the student's own init.
    assert not {'backbone.cls_token', 'backbone.dist_token'} & set(
        report.keys('copied')
    )


def test_distilled_fullcopy_carries_the_distillation_token(tmp_path):
    state = read(save_family('deit-distilled', tmp_path / 'd.pth'))
    student, _ = family_classifier(state, 'GatedLinearAttention')
    report = apply_init(student, state, 'FullCopy')
    copied = set(report.keys('copied'))
    assert {'backbone.dist_token', 'backbone.pos_embed'} <= copied
    assert torch.equal(
        student.backbone.dist_token, state['backbone.dist_token']
    )
    # FullCopy leaves the head (both heads) to the task.
    assert not any(k.startswith('head.') for k in copied)


def test_a_student_without_the_token_drops_it_with_a_report_line(tmp_path):
    state = read(save_family('deit-distilled', tmp_path / 'd.pth'))
    student, _ = family_classifier(
        state, 'GatedLinearAttention', with_dist_token=False
    )
    report = apply_init(student, state, 'FullCopy')
    assert (
        'skipped: backbone.dist_token: the student has no distillation '
        'token' in report.table()
    )
    assert 'backbone.dist_token' in report.keys('skipped')
    pos = state['backbone.pos_embed']
    torch.testing.assert_close(
        student.backbone.pos_embed.data,
        torch.cat([pos[:, :1], pos[:, 2:]], dim=1),
    )


def test_deit3_class_token_gets_a_zero_position(tmp_path):
    state = read(save_family('deit3', tmp_path / 'd3.pth'))
    timm_pos = timm_model('deit3').pos_embed
    assert timm_pos.shape[1] == 16  # timm: patches only
    pos = state['backbone.pos_embed']
    assert pos.shape[1] == 17 and not pos[0, 0].any()
    assert torch.equal(pos[:, 1:], timm_pos.detach())


@pytest.mark.parametrize('family', ['deit3', 'deit-distilled', 'clip'])
def test_convert_writes_the_family_config(family, tmp_path):
    path = save_family(family, tmp_path / f'{family}.pth')
    result = convert_to_student(
        str(path), str(tmp_path / 'out'), operator='gla', num_heads=2
    )
    config = Config.fromfile(result['config'])
    options = result['arch'].backbone_options()
    assert options  # each family needs more than the plain ViT
    for net in ('student', 'teacher'):
        backbone = config.model[net].backbone
        assert {k: backbone[k] for k in options} == options, net
    assert config.model.teacher.backbone.attn_cfg.type == 'SoftmaxAttention'
    # The teacher sees inputs normalised as it was trained: OpenAI CLIP's
    # statistics for CLIP, the recipe's ImageNet ones for the DeiTs.
    mean = [122.771, 116.746, 104.094] if family == 'clip' else [123.675]
    assert config.data_preprocessor.mean[: len(mean)] == mean
    head = (
        'DeiTClsHead'
        if family == 'deit-distilled'
        else 'VisionTransformerClsHead'
    )
    assert config.model.student.head.type == head
    assert config.model.teacher.head.type == head
    student = load_checkpoint_file(result['student'])['state_dict']
    for key in result['report'].keys('copied'):
        assert torch.equal(student[key], read(path)[key]), key
