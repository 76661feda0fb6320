"""DINOv3 in timm's layout (its ``Eva``: a class token and 4 registers, no
position table, rotary positions, layer scales; no qkv bias, q/v biases,
or the H+ SwiGLU MLP): timm's own model is the oracle. Read with
``--format auto`` and ``dinov3``, copied with FullCopy into
LinearVisionTransformer with softmax attention and RoPE, every token, the
pooled features (class token, or timm's default patch mean) and the logits
equal timm's to 1e-5 at two image sizes, also from Meta's layout (its
masked key bias zeroed); MLPCopy puts the MLPs and layer
scales into GLA and ReLU students with RoPE; tools/convert.py writes the
student and its config."""

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from vit_families import (
    family_classifier,
    images,
    meta_dinov3_layout,
    read,
    save_family,
    timm_model,
)

from mmlvit.checkpoint import load_checkpoint_file
from mmlvit.transfer import COMPONENTS, apply_init, component_of, readers
from mmlvit.transfer.family_defaults import default_num_heads

LAYOUTS = ['dinov3', 'dinov3-qkvb', 'dinov3-swiglu']
SIZES = (32, 48)  # 4x4 and 6x6 patches of 8 px


def fullcopy(state, **backbone):
    model, _ = family_classifier(state, 'SoftmaxAttention', **backbone)
    report = apply_init(model, state, 'FullCopy', components=COMPONENTS)
    assert report.unused == [] and report.keys('default') == []
    return model.eval()


@pytest.mark.parametrize(
    'layout, file_layout',
    [(layout, 'timm') for layout in LAYOUTS]
    + [('dinov3', 'meta'), ('dinov3-qkvb', 'meta'), ('dinov3-swiglu', 'meta')],
)
def test_fullcopy_softmax_student_computes_timm_dinov3(
    layout, file_layout, tmp_path, monkeypatch
):
    logged = []
    monkeypatch.setattr(readers, 'print_log', lambda m, **k: logged.append(m))
    oracle = timm_model(layout)
    state = oracle.state_dict()
    if file_layout == 'meta':
        state = meta_dinov3_layout(state)
    path = tmp_path / f'{layout}.pth'
    torch.save(state, path)
    for fmt in ('auto', 'dinov3'):
        state = read(path, fmt)
        assert "as a 'dinov3' checkpoint" in logged[-1]
        tokens, pooled = fullcopy(state, out_type='raw'), fullcopy(state)
        backbone = pooled.backbone
        assert backbone.pos_embed is None and backbone.num_extra_tokens == 5
        assert backbone.rope.type == 'dinov3' and backbone.ln1.eps == 1e-5
        for size in SIZES:
            x = images(layout, size=size)
            with torch.no_grad():
                features = oracle.forward_features(x)
                torch.testing.assert_close(
                    tokens.extract_feat(x)[-1], features, rtol=0, atol=1e-5
                )
                torch.testing.assert_close(
                    pooled.extract_feat(x)[-1],
                    oracle.forward_head(features, pre_logits=True),
                    rtol=0,
                    atol=1e-5,
                )
                torch.testing.assert_close(
                    pooled(x, mode='tensor'), oracle(x), rtol=0, atol=1e-5
                )


def test_timms_default_patch_mean_pooling(tmp_path):
    """timm's default global_pool 'avg': the mean of the normed patch
    tokens, as out_type 'featmap' with a GlobalAveragePooling neck."""
    state = read(save_family('dinov3', tmp_path / 'd.pth'))
    model = fullcopy(state, out_type='featmap')
    model.neck = MODELS.build(dict(type='GlobalAveragePooling'))
    oracle = timm_model('dinov3', global_pool='avg')
    x = images('dinov3')
    with torch.no_grad():
        torch.testing.assert_close(
            model(x, mode='tensor'), oracle(x), rtol=0, atol=1e-5
        )


def test_the_qkv_bias_has_a_zero_key_part_or_is_absent(tmp_path):
    timm_state = timm_model('dinov3-qkvb').state_dict()
    state = read(save_family('dinov3-qkvb', tmp_path / 'b.pth'))
    bias = state['backbone.layers.1.attn.qkv.bias']
    assert torch.equal(bias[:64], timm_state['blocks.1.attn.q_bias'])
    assert not bias[64:128].any()
    assert torch.equal(bias[128:], timm_state['blocks.1.attn.v_bias'])
    state = read(save_family('dinov3', tmp_path / 'n.pth'))
    assert not any(k.endswith('qkv.bias') for k in state)
    assert fullcopy(state).backbone.layers[0].attn.qkv.bias is None


@pytest.mark.parametrize('layout', ['dinov3', 'dinov3-swiglu'])
@pytest.mark.parametrize(
    'attn', ['GatedLinearAttention', 'ReLULinearAttention']
)
def test_mlpcopy_copies_mlps_and_layer_scales(layout, attn, tmp_path):
    state = read(save_family(layout, tmp_path / 'd.pth'))
    student, _ = family_classifier(state, attn)
    assert student.backbone.rope is not None
    assert student.backbone.pos_embed is None
    report = apply_init(student, state, 'MLPCopy')
    expected = {k for k in state if component_of(k) in ('mlp', 'layer_scale')}
    assert len(expected) == 12  # 2 blocks x (4 MLP tensors, 2 scales)
    assert set(report.keys('copied')) == expected
    params = dict(student.named_parameters())
    for key in expected:
        assert torch.equal(params[key], state[key]), key
    assert student.backbone.reg_token.shape == (1, 4, 64)
    student.eval()
    for size in SIZES:
        with torch.no_grad():
            x = images(layout, size=size)
            assert student(x, mode='tensor').isfinite().all()


def test_convert_tool_writes_a_rope_student_without_positions(
    tmp_path, load_tool
):
    """224 px in the recipe: the rotary tables follow the grid, nothing
    is resampled; the written distiller loads timm's file as its teacher
    and the student strictly."""
    path = save_family('dinov3', tmp_path / 'dinov3.pth')
    out = tmp_path / 'out'
    load_tool('tools/convert.py').main(
        [str(path), '--operator', 'gla', '--setting', 'MLPCopy']
        + ['--num-heads', '2', '--out', str(out)]
    )
    (config_path,) = out.glob('*.py')
    config = Config.fromfile(config_path)
    for net in ('student', 'teacher'):
        backbone = config.model[net].backbone
        assert backbone.rope_cfg == dict(type='dinov3', temperature=100)
        assert backbone.pos_embed_type == 'none'
        assert backbone.qkv_bias is False
        assert backbone.norm_cfg == dict(type='LN', eps=1e-5)
        assert backbone.num_register_tokens == 4
    init_default_scope('mmpretrain')
    distiller = MODELS.build(config.model)
    saved = load_checkpoint_file(config.load_from)['state_dict']
    distiller.student.load_state_dict(saved, strict=True)
    assert 'backbone.pos_embed' not in saved
    teacher = distiller.teacher.eval()
    x = images('dinov3', size=48)
    with torch.no_grad():
        torch.testing.assert_close(
            teacher.extract_feat(x)[-1],
            timm_model('dinov3').forward_head(
                timm_model('dinov3').forward_features(x), pre_logits=True
            ),
            rtol=0,
            atol=1e-5,
        )


def test_dinov3_heads_follow_its_64_channel_heads():
    assert default_num_heads(384, 'dinov3') == 6
    assert default_num_heads(1280, 'dinov3') == 20  # ViT-H+ (ViT-H: 16)
    assert default_num_heads(4096, 'dinov3') == 32  # 7B: 128 a head
    assert default_num_heads(1280) == 16
