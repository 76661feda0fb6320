"""load_softmax_checkpoint: timm's own DeiT-tiny is the oracle.

timm's ``deit_tiny_patch16_224`` (random weights) is saved in every layout;
read back into mmpretrain's ImageClassifier(VisionTransformer deit-t), it
must compute exactly what timm computes on the same input.
"""

import os

import pytest
import timm
import torch
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from safetensors.torch import save_file

from mmlvit.checkpoint import CheckpointError, UnsafeCheckpointError
from mmlvit.transfer import load_softmax_checkpoint


def deit_tiny(**kwargs):
    torch.manual_seed(0)
    model = timm.create_model(
        'deit_tiny_patch16_224', pretrained=False, **kwargs
    )
    # timm inits the class token at ~1e-6: give every tensor real values.
    with torch.no_grad():
        model.cls_token.normal_(std=0.5)
    return model.eval()


def mmpretrain_deit_tiny(head=True, **backbone):
    init_default_scope('mmpretrain')
    cfg = dict(
        type='ImageClassifier',
        backbone=dict(type='VisionTransformer', arch='deit-tiny', **backbone),
    )
    if head:
        cfg['head'] = dict(
            type='VisionTransformerClsHead', num_classes=1000, in_channels=192
        )
    return MODELS.build(cfg).eval()


@pytest.fixture(scope='module')
def timm_classifier():
    return deit_tiny()


@pytest.fixture(scope='module')
def timm_features():
    """A headless DeiT-tiny (what self-supervised releases hold)."""
    return deit_tiny(num_classes=0)


@pytest.fixture(scope='module')
def image():
    return torch.randn(
        1, 3, 224, 224, generator=torch.Generator().manual_seed(1)
    )


def assert_same_output(state_dict, timm_model, image, head=True, **backbone):
    model = mmpretrain_deit_tiny(head=head, **backbone)
    model.load_state_dict(state_dict, strict=True)
    with torch.no_grad():
        expected = timm_model(image)
        got = model(image, mode='tensor')
    got = got if head else got[-1]
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    'layout', ['timm.pth', 'timm.safetensors', 'deit.pth']
)
def test_supervised_layouts(layout, timm_classifier, image, tmp_path):
    state = timm_classifier.state_dict()
    path = tmp_path / f'deit_tiny.{layout}'
    if layout == 'timm.safetensors':
        save_file({k: v.contiguous() for k, v in state.items()}, path)
    elif layout == 'deit.pth':
        torch.save({'model': state}, path)  # the official DeiT release
    else:
        torch.save(state, path)
    for format in ('auto', layout.split('.')[0]):
        converted = load_softmax_checkpoint(path, format=format)
        assert 'head.layers.head.weight' in converted
        assert_same_output(converted, timm_classifier, image)


def test_in_memory_state_dict(timm_classifier, image):
    converted = load_softmax_checkpoint(timm_classifier.state_dict())
    assert_same_output(converted, timm_classifier, image)


def test_mae_layout(image, tmp_path):
    timm_model = deit_tiny(num_classes=0, global_pool='avg')  # fc_norm
    state = dict(timm_model.state_dict())
    assert 'fc_norm.weight' in state and 'norm.weight' not in state
    state['mask_token'] = torch.zeros(1, 1, 192)
    state['decoder_embed.weight'] = torch.zeros(128, 192)
    state['decoder_blocks.0.norm1.weight'] = torch.zeros(128)
    path = tmp_path / 'mae.pth'
    torch.save({'model': state}, path)
    for format in ('auto', 'mae'):
        converted = load_softmax_checkpoint(path, format=format)
        assert not any('decoder' in k or 'mask' in k for k in converted)
        assert_same_output(
            converted,
            timm_model,
            image,
            head=False,
            out_type='avg_featmap',
            final_norm=False,
        )


def dino_head(prefix):
    return {
        f'{prefix}head.mlp.0.weight': torch.zeros(64, 192),
        f'{prefix}head.last_layer.weight_g': torch.zeros(1, 256),
    }


def test_dino_layout_uses_the_teacher(timm_features, image, tmp_path):
    teacher = timm_features.state_dict()
    student = {k: torch.randn_like(v) for k, v in teacher.items()}
    ckpt = {
        'teacher': {
            **{f'backbone.{k}': v for k, v in teacher.items()},
            **dino_head(''),
        },
        'student': {
            **{f'module.backbone.{k}': v for k, v in student.items()},
            **dino_head('module.'),
        },
        'epoch': 100,
    }
    path = tmp_path / 'dino_full_checkpoint.pth'
    torch.save(ckpt, path)
    for format in ('auto', 'dino'):
        converted = load_softmax_checkpoint(path, format=format)
        assert_same_output(converted, timm_features, image, head=False)
    # The student alone (a DDP-wrapped checkpoint without a teacher).
    del ckpt['teacher']
    converted = load_softmax_checkpoint(ckpt)
    assert torch.equal(
        converted['backbone.layers.0.attn.qkv.weight'],
        student['blocks.0.attn.qkv.weight'],
    )


def test_mocov3_layout(timm_features, image, tmp_path):
    encoder = timm_features.state_dict()
    weights = {f'module.base_encoder.{k}': v for k, v in encoder.items()}
    weights.update(
        {
            # projector (replaces the head) and the rest of the MoCo model
            'module.base_encoder.head.0.weight': torch.zeros(64, 192),
            'module.base_encoder.head.1.running_mean': torch.zeros(64),
            'module.momentum_encoder.blocks.0.norm1.weight': torch.zeros(192),
            'module.predictor.0.weight': torch.zeros(64, 64),
        }
    )
    path = tmp_path / 'mocov3.pth.tar'
    torch.save({'state_dict': weights, 'epoch': 300}, path)
    for format in ('auto', 'mocov3'):
        converted = load_softmax_checkpoint(path, format=format)
        assert_same_output(converted, timm_features, image, head=False)


@pytest.mark.parametrize('release', ['backbone', 'full'])
def test_ibot_layouts(release, timm_features, image, tmp_path):
    backbone = dict(timm_features.state_dict())
    backbone['masked_embed'] = torch.zeros(1, 192)
    if release == 'backbone':  # checkpoint_teacher.pth
        ckpt = {'state_dict': backbone}
    else:
        ckpt = {
            'teacher': {f'backbone.{k}': v for k, v in backbone.items()},
            'student': {
                f'module.backbone.{k}': v for k, v in backbone.items()
            },
        }
    path = tmp_path / f'ibot_{release}.pth'
    torch.save(ckpt, path)
    for format in ('auto', 'ibot'):
        converted = load_softmax_checkpoint(path, format=format)
        assert 'backbone.masked_embed' not in converted
        assert_same_output(converted, timm_features, image, head=False)


def test_mmpretrain_layout_round_trip(timm_classifier, image, tmp_path):
    converted = load_softmax_checkpoint(timm_classifier.state_dict())
    path = tmp_path / 'mmpretrain.pth'
    torch.save({'state_dict': converted, 'meta': {'epoch': 1}}, path)
    again = load_softmax_checkpoint(path)
    assert list(again) == list(converted)
    assert_same_output(again, timm_classifier, image)
    backbone_only = {
        k[len('backbone.') :]: v
        for k, v in converted.items()
        if k.startswith('backbone.')
    }
    assert set(load_softmax_checkpoint(backbone_only, 'mmpretrain')) == {
        k for k in converted if k.startswith('backbone.')
    }


def test_unknown_layout_names_file_and_keys(tmp_path):
    path = tmp_path / 'mystery.pth'
    torch.save(
        {
            'encoder.layer.0.weight': torch.zeros(2),
            'extras': {'alpha': torch.zeros(1)},
        },
        path,
    )
    with pytest.raises(CheckpointError) as err:
        load_softmax_checkpoint(path)
    message = str(err.value)
    assert str(path) in message
    assert "'encoder.layer.0.weight'" in message and "'alpha'" in message


def test_wrong_format_override(timm_classifier, tmp_path):
    path = tmp_path / 'plain_timm.pth'
    torch.save(timm_classifier.state_dict(), path)
    with pytest.raises(
        CheckpointError,
        match=rf"{path} is not a 'mocov3' checkpoint.*"
        r"'blocks\.0\.norm1\.weight'",
    ):
        load_softmax_checkpoint(path, format='mocov3')
    with pytest.raises(ValueError, match='Unknown checkpoint format'):
        load_softmax_checkpoint(path, format='jax')


def test_unsupported_keys_are_an_error(timm_classifier):
    state = dict(timm_classifier.state_dict())
    state['blocks.0.extra.weight'] = torch.ones(192)
    with pytest.raises(
        CheckpointError,
        match=r'1 keys have no counterpart.*'
        r"'blocks\.0\.extra\.weight'.*Supported families: ",
    ):
        load_softmax_checkpoint(state)
    # One block's layer scale: a partial DeiT III, refused as such.
    del state['blocks.0.extra.weight']
    state['blocks.0.ls1.gamma'] = torch.ones(192)
    with pytest.raises(
        CheckpointError, match=r'resembles DeiT III .* but only partly'
    ):
        load_softmax_checkpoint(state)


def test_corrupt_and_unsafe_files_are_rejected(timm_classifier, tmp_path):
    good = tmp_path / 'good.pth'
    torch.save(timm_classifier.state_dict(), good)
    truncated = tmp_path / 'truncated.pth'
    truncated.write_bytes(good.read_bytes()[:5000])
    with pytest.raises(CheckpointError, match='truncated.pth'):
        load_softmax_checkpoint(truncated)

    broken = tmp_path / 'broken.safetensors'
    broken.write_bytes(b'\x10\x00\x00\x00\x00\x00\x00\x00{"a": garbage')
    with pytest.raises(CheckpointError, match='broken.safetensors'):
        load_softmax_checkpoint(broken)

    marker = tmp_path / 'pwned'

    class RunsCode:
        def __reduce__(self):
            return (os.system, (f'touch {marker}',))

    evil = tmp_path / 'evil.pth'
    torch.save({'model': timm_classifier.state_dict(), 'x': RunsCode()}, evil)
    with pytest.raises(UnsafeCheckpointError, match='evil.pth'):
        load_softmax_checkpoint(evil)
    assert not marker.exists()

    not_a_dict = tmp_path / 'tensor.pth'
    torch.save(torch.zeros(3), not_a_dict)
    with pytest.raises(CheckpointError, match='holds a Tensor'):
        load_softmax_checkpoint(not_a_dict)
    with pytest.raises(FileNotFoundError, match='missing.pth'):
        load_softmax_checkpoint(tmp_path / 'missing.pth')
