"""SigLIP's image tower (MAP head, and the GAP variant): timm's own model is
the oracle. Read with ``--format auto`` and ``siglip``, copied with FullCopy
into LinearVisionTransformer with softmax attention plus the pooling neck,
it computes timm's tokens, pooled features and logits to 1e-5; MLPCopy puts
its MLPs and the attention pool into GLA and ReLU students;
tools/convert.py writes a config whose distiller builds and loads the
teacher."""

import dataclasses

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from vit_families import (
    IMAGES,
    family_classifier,
    read,
    save_family,
    timm_model,
)

from mmlvit.transfer import (
    COMPONENTS,
    apply_init,
    component_of,
    infer_vit_arch,
)
from mmlvit.transfer.family_defaults import default_num_heads

TANH = dict(type='GELU', approximate='tanh')
NECKS = {
    'siglip': 'AttentionPoolingNeck',
    'siglip-gap': 'GlobalAveragePooling',
}


def fullcopy_softmax(state, **backbone):
    model, cfg = family_classifier(state, 'SoftmaxAttention', **backbone)
    report = apply_init(model, state, 'FullCopy', components=COMPONENTS)
    assert report.unused == [] and report.keys('default') == []
    return model.eval(), cfg


def assert_computes_timm(model, timm):
    """Tokens (B, N, C) after the final norm, pooled (B, C) features and
    logits equal timm's to 1e-5; returns the largest difference."""
    with torch.no_grad():
        tokens = timm.forward_features(IMAGES)
        pooled = timm.forward_head(tokens, pre_logits=True)
        logits = timm.forward_head(tokens)
        got = model.backbone(IMAGES)[-1]
        if got.dim() == 4:  # the GAP variant's map (B, C, H, W)
            got = got.flatten(2).transpose(1, 2)
        pairs = [
            (got, tokens),
            (model.extract_feat(IMAGES)[-1], pooled),
            (model(IMAGES, mode='tensor'), logits),
        ]
    for ours, theirs in pairs:
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
    return max(float((a - b).abs().max()) for a, b in pairs)


@pytest.mark.parametrize('family', ['siglip', 'siglip-gap'])
def test_fullcopy_softmax_student_computes_timm_siglip(family, tmp_path):
    path = save_family(family, tmp_path / f'{family}.pth')
    for fmt in ('auto', 'siglip'):
        model, cfg = fullcopy_softmax(read(path, fmt))
        assert model.backbone.cls_token is None
        assert type(model.neck).__name__ == NECKS[family]
        assert_computes_timm(model, timm_model(family))


def test_a_gelu_tanh_tower_needs_the_tanh_activation(tmp_path):
    """timm's B/32 and So400m SigLIP use GELU's tanh form; the weights
    cannot show it: GELU(approximate='tanh') in the blocks and the neck is
    exact, the exact GELU is not."""
    timm = timm_model('siglip', act_layer='gelu_tanh')
    state = read(timm.state_dict())
    exact, cfg = fullcopy_softmax(state)
    cfg['backbone']['layer_cfgs'] = dict(act_cfg=TANH)
    cfg['neck'] = dict(cfg['neck'], act_cfg=TANH)
    init_default_scope('mmpretrain')
    tanh = MODELS.build(cfg)
    apply_init(tanh, state, 'FullCopy', components=COMPONENTS)
    assert_computes_timm(tanh.eval(), timm)
    with torch.no_grad():
        gap = exact(IMAGES, mode='tensor') - timm(IMAGES)
    assert gap.abs().max() > 1e-4


@pytest.mark.parametrize(
    'attn', ['GatedLinearAttention', 'ReLULinearAttention']
)
def test_mlpcopy_copies_mlps_and_the_attention_pool(attn, tmp_path):
    state = read(save_family('siglip', tmp_path / 'siglip.pth'))
    student, _ = family_classifier(state, attn)
    fresh = {k: v.clone() for k, v in student.state_dict().items()}
    report = apply_init(student, state, 'MLPCopy')
    pool = {k for k in state if component_of(k) == 'attn_pool'}
    assert len(pool) == 13 and 'neck.latent' in pool
    expected = pool | {k for k in state if component_of(k) == 'mlp'}
    assert set(report.keys('copied')) == expected
    params = dict(student.named_parameters())
    for key in params:
        source = state if key in expected else fresh
        assert torch.equal(params[key], source[key]), key
    assert 'attn_pool    13 / 49,920' in report.table()
    assert student.backbone.cls_token is None


def test_random_leaves_the_attention_pool_at_its_init(tmp_path):
    state = read(save_family('siglip', tmp_path / 'siglip.pth'))
    student, _ = family_classifier(state, 'GatedLinearAttention')
    report = apply_init(student, state, 'Random')
    assert report.keys('copied') == []
    assert not torch.equal(student.neck.latent, state['neck.latent'])


@pytest.mark.parametrize('num_classes', [0, 10])
def test_convert_tool_writes_a_siglip_student(
    num_classes, tmp_path, load_tool
):
    """tools/convert.py on a SigLIP file (with a classifier, and without
    one, as released): the neck and the token layout in both networks;
    the distiller builds and its teacher loads the file."""
    timm = timm_model('siglip', num_classes=num_classes)
    path = tmp_path / 'siglip.pth'
    torch.save(timm.state_dict(), path)
    out = tmp_path / 'out'
    load_tool('tools/convert.py').main(
        [str(path), '--operator', 'gla', '--setting', 'MLPCopy']
        + ['--num-heads', '2', '--out', str(out)]
    )
    (config,) = out.glob('*.py')
    cfg = Config.fromfile(config)
    for net in ('student', 'teacher'):
        backbone = cfg.model[net].backbone
        assert (backbone.with_cls_token, backbone.out_type) == (False, 'raw')
        assert cfg.model[net].neck.type == 'AttentionPoolingNeck'
    assert cfg.model.teacher.backbone.attn_cfg.type == 'SoftmaxAttention'
    assert (cfg.model.teacher.head is None) == (num_classes == 0)
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model)  # reads the teacher's file
    teacher = model.teacher.eval()
    with torch.no_grad():
        torch.testing.assert_close(
            teacher.extract_feat(IMAGES)[-1],
            timm.forward_head(timm.forward_features(IMAGES), True),
            rtol=0,
            atol=1e-5,
        )
    student = torch.load(out / f'{config.stem}_init.pth')['state_dict']
    assert torch.equal(student['neck.latent'], timm.attn_pool.latent)


def test_an_mmpretrain_file_keeps_its_neck(tmp_path):
    """A SigLIP classifier saved in mmpretrain keys reads back whole (the
    neck too) and as the same architecture."""
    state = read(save_family('siglip', tmp_path / 'siglip.pth'))
    model, _ = fullcopy_softmax(state)
    path = tmp_path / 'mmpretrain.pth'
    torch.save({'state_dict': model.state_dict()}, path)
    again = read(path)
    assert {k for k in again if k.startswith('neck.')} == {
        k for k in state if k.startswith('neck.')
    }
    arch = infer_vit_arch(again, num_heads=2)
    # All but what only the family says (its input normalisation): an
    # mmpretrain file does not name a family.
    expected = infer_vit_arch(state, num_heads=2)
    assert expected.input_norm == dict(mean=[127.5] * 3, std=[127.5] * 3)
    assert arch == dataclasses.replace(expected, input_norm=None)
    assert arch.neck['type'] == 'AttentionPoolingNeck'


def test_so400m_width_gets_its_16_heads():
    """The head count cannot be read off the weights: SigLIP's So400m
    (1152 wide) has 16 heads, not one per 64 channels."""
    assert default_num_heads(1152) == 16
