"""DINOv2 in timm's layout (with 4 registers, without, and the giant's
packed SwiGLU MLP): timm's own model is the oracle. Read with ``--format
auto`` and ``dinov2``, copied with FullCopy into LinearVisionTransformer
with softmax attention, every output token equals timm's
``forward_features`` to 1e-5, also at another image size (the table
resampled by the reader, compared with timm resampling at run time);
MLPCopy puts the MLPs and layer scales into GLA and ReLU students."""

import pytest
import torch
from mmengine.config import Config
from tiny_vit import perturbed_timm_model
from vit_families import (
    DINOV2_NAMES,
    DINOV2_TINY,
    dinov2_model,
    family_classifier,
    read,
)

from mmlvit.apis import convert_to_student
from mmlvit.checkpoint import load_checkpoint_file
from mmlvit.models.distillers import load_teacher_weights
from mmlvit.transfer import COMPONENTS, apply_init, component_of, readers

LAYOUTS = ('reg4', 'plain', 'giant-swiglu')
GEN = torch.Generator().manual_seed(5)
IMAGES = {
    size: torch.randn(2, 3, size, size, generator=GEN) for size in (56, 42)
}


def save(layout, path):
    torch.save(dinov2_model(layout).state_dict(), path)
    return path


def fullcopy_model(state, **backbone):
    model, _ = family_classifier(
        state, 'SoftmaxAttention', out_type='raw', **backbone
    )
    report = apply_init(model, state, 'FullCopy', components=COMPONENTS)
    assert report.unused == [] and report.keys('default') == []
    return model.eval()


@pytest.mark.parametrize('layout', LAYOUTS)
def test_fullcopy_softmax_student_computes_timm_dinov2(
    layout, tmp_path, monkeypatch
):
    logged = []
    monkeypatch.setattr(readers, 'print_log', lambda m, **k: logged.append(m))
    path = save(layout, tmp_path / 'dinov2.pth')
    for fmt in ('auto', 'dinov2'):
        state = read(path, fmt)
        assert "as a 'dinov2' checkpoint" in logged[-1]
        assert 'registers are carried without a position' in logged[-1]
        model = fullcopy_model(state)
        registers = model.backbone.num_register_tokens
        assert registers == (0 if layout == 'plain' else 4)
        assert model.backbone.num_extra_tokens == 1 + registers
        with torch.no_grad():
            torch.testing.assert_close(
                model.extract_feat(IMAGES[56])[-1],
                dinov2_model(layout).forward_features(IMAGES[56]),
                rtol=0,
                atol=1e-5,
            )
    swiglu = [k for k in state if '.ffn.w12.' in k or '.ffn.w3.' in k]
    assert len(swiglu) == (8 if layout == 'giant-swiglu' else 0)


@pytest.mark.parametrize('layout', ['reg4', 'plain'])
def test_a_table_resampled_to_another_size_is_timms(layout, tmp_path):
    """Built at 56 px (4x4 patches), converted for 42 px (3x3): the reader
    resamples the table with timm's helper, as timm does at run time for a
    42 px input (dynamic_img_size)."""
    path = save(layout, tmp_path / 'dinov2.pth')
    state = read(path, img_size=42)
    rows = 1 + 9  # class token, 3x3 patches; registers have no row
    assert state['backbone.pos_embed'].shape == (1, rows, 64)
    # A side that is no multiple of 14: the padded patch embedding's grid.
    padded = read(path, img_size=40)['backbone.pos_embed']
    assert torch.equal(padded, state['backbone.pos_embed'])
    model = fullcopy_model(state)
    assert model.backbone.patch_resolution == (3, 3)
    oracle = dinov2_model(layout, dynamic_img_size=True)
    with torch.no_grad():
        expected = oracle.forward_features(IMAGES[42])
        torch.testing.assert_close(
            model.extract_feat(IMAGES[42])[-1], expected, rtol=0, atol=1e-5
        )
        # The teacher loader reads the file at the teacher's size.
        teacher, _ = family_classifier(
            state, 'SoftmaxAttention', out_type='raw'
        )
        load_teacher_weights(teacher, str(path))
        torch.testing.assert_close(
            teacher.eval().extract_feat(IMAGES[42])[-1],
            expected,
            rtol=0,
            atol=1e-5,
        )


@pytest.mark.parametrize('layout', ['reg4', 'giant-swiglu'])
@pytest.mark.parametrize(
    'attn', ['GatedLinearAttention', 'ReLULinearAttention']
)
def test_mlpcopy_copies_mlps_and_layer_scales(layout, attn, tmp_path):
    state = read(save(layout, tmp_path / 'dinov2.pth'))
    student, _ = family_classifier(state, attn)
    report = apply_init(student, state, 'MLPCopy')
    expected = {k for k in state if component_of(k) in ('mlp', 'layer_scale')}
    assert len(expected) == 12  # 2 blocks x (4 MLP tensors, 2 scales)
    assert set(report.keys('copied')) == expected
    params = dict(student.named_parameters())
    for key in expected:
        assert torch.equal(params[key], state[key]), key
    # Attention, tokens (registers too) and embeddings stay the student's.
    assert not any(
        component_of(k) in ('attn_qkv', 'attn_proj', 'cls_token')
        for k in report.keys('copied')
    )
    assert student.backbone.reg_token.shape == (1, 4, 64)


def test_fullcopy_into_gla_carries_the_registers(tmp_path):
    state = read(save('reg4', tmp_path / 'dinov2.pth'))
    student, _ = family_classifier(state, 'GatedLinearAttention')
    report = apply_init(student, state, 'FullCopy')
    assert 'backbone.reg_token' in report.keys('copied')
    assert torch.equal(student.backbone.reg_token, state['backbone.reg_token'])


def test_a_student_without_registers_drops_them_with_a_report_line(
    tmp_path,
):
    state = read(save('reg4', tmp_path / 'dinov2.pth'))
    student, _ = family_classifier(
        state, 'GatedLinearAttention', num_register_tokens=0
    )
    report = apply_init(student, state, 'FullCopy')
    assert 'backbone.reg_token: the student has no register tokens' in (
        report.table()
    )


def test_convert_writes_a_224_px_dinov2_config(tmp_path):
    """tools/convert.py's default recipe feeds 224 px: the 56 px table is
    resampled to 16x16, student and teacher are configured for it; the
    release has no classifier, so the teacher has none."""
    model = perturbed_timm_model(
        DINOV2_NAMES['reg4'], **dict(DINOV2_TINY, num_classes=0)
    )
    path = tmp_path / 'dinov2.pth'
    torch.save(model.state_dict(), path)
    result = convert_to_student(
        str(path), str(tmp_path / 'out'), operator='gla', num_heads=2
    )
    config = Config.fromfile(result['config'])
    for net in ('student', 'teacher'):
        backbone = config.model[net].backbone
        assert backbone.img_size == 224 and backbone.patch_size == 14
        assert backbone.num_register_tokens == 4
        assert backbone.layer_scale_init_value > 0
    assert config.model.teacher.backbone.attn_cfg.type == 'SoftmaxAttention'
    assert config.model.teacher.head is None
    student = load_checkpoint_file(result['student'])['state_dict']
    assert student['backbone.pos_embed'].shape == (1, 1 + 16 * 16, 64)
    assert 'backbone.layers.0.ffn.layers.0.0.weight' in (
        result['report'].keys('copied')
    )
