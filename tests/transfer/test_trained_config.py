"""A softmax ViT in mmpretrain keys saved by an mmengine Runner (a model
fine-tuned with mmlvit): the rotary positions, the absent position table
and the LayerNorm eps its weights cannot show come from the config in
its ``meta['cfg']``, read and never executed, so a FullCopy softmax student
still computes the source model (timm's EVA-02 and DINOv3 as oracles)."""

import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from tiny_runs import train_from_cfg
from vit_families import family_classifier, images, read, save_family
from vit_families import timm_model as family_model

from mmlvit.apis import convert_to_student
from mmlvit.transfer import (
    COMPONENTS,
    apply_init,
    infer_vit_arch,
    trained_config,
)
from mmlvit.transfer.trained_config import trained_backbone_settings

# The backbone settings of each family's softmax config.
TRAINED_BACKBONES = {
    'eva02': dict(rope_cfg=dict(type='eva02', ref_feat_shape=(16, 16))),
    'dinov3': dict(
        rope_cfg=dict(type='dinov3', temperature=100),
        pos_embed_type='none',
        norm_cfg=dict(type='LN', eps=1e-5),
    ),
}


def runner_checkpoint(family, tmp_path, with_config=True):
    """The family's weights in mmpretrain keys, saved as a Runner saves
    them: the config as ``Config.pretty_text`` in ``meta['cfg']``."""
    state = read(save_family(family, tmp_path / f'{family}_timm.pth'))
    model = dict(
        type='ImageClassifier',
        backbone=dict(
            type='LinearVisionTransformer',
            attn_cfg=dict(type='SoftmaxAttention'),
            **TRAINED_BACKBONES[family],
        ),
    )
    meta = dict(epoch=3, iter=30)
    if with_config:
        meta['cfg'] = Config(dict(model=model)).pretty_text
    path = tmp_path / f'{family}_epoch_3.pth'
    torch.save(dict(state_dict=dict(state), meta=meta), path)
    return path


@pytest.mark.parametrize('family', ['eva02', 'dinov3'])
def test_fullcopy_of_a_runner_checkpoint_computes_the_source(
    family, tmp_path, monkeypatch
):
    logged = []
    monkeypatch.setattr(
        trained_config, 'print_log', lambda m, **k: logged.append(m)
    )
    state = read(runner_checkpoint(family, tmp_path))
    assert "its config (meta.cfg) gives the backbone {'rope'" in logged[-1]
    arch = infer_vit_arch(state, num_heads=2)
    rope = TRAINED_BACKBONES[family]['rope_cfg']
    assert arch.rope == rope
    assert arch.abs_pos_embed is (family == 'eva02')
    model, _ = family_classifier(state, 'SoftmaxAttention')
    report = apply_init(model, state, 'FullCopy', components=COMPONENTS)
    assert report.unused == [] and report.keys('default') == []
    x = images(family)
    with torch.no_grad():
        torch.testing.assert_close(
            model.eval()(x, mode='tensor'),
            family_model(family)(x),
            rtol=0,
            atol=1e-5,
        )


@pytest.mark.parametrize('family', ['eva02', 'dinov3'])
def test_without_its_config_the_file_shows_no_rotary_positions(
    family, tmp_path
):
    state = read(runner_checkpoint(family, tmp_path, with_config=False))
    arch = infer_vit_arch(state, num_heads=2)
    assert arch.rope is None and arch.abs_pos_embed


@pytest.mark.parametrize(
    'text',
    [
        "model = dict(backbone=dict(rope_cfg=__import__('os').system("
        "'touch {marker}')))",
        "import os\nos.system('touch {marker}')\nmodel = dict(backbone=dict("
        "norm_cfg=dict(eps=1e-5), rope_cfg=open('{marker}', 'w')))",
        'model = dict(backbone=',
    ],
)
def test_the_config_text_is_never_executed(text, tmp_path):
    marker = tmp_path / 'executed'
    meta = dict(cfg=text.format(marker=marker))
    settings = trained_backbone_settings(dict(meta=meta), 'f.pth')
    assert not marker.exists()
    assert 'rope' not in settings
    assert settings in ({}, {'norm_eps': 1e-5})


def test_convert_writes_the_trained_settings_into_student_and_teacher(
    tmp_path,
):
    """tools/convert.py on a DINOv3 fine-tuned in mmlvit: the teacher is
    built with the rotary positions and without a position table, so its
    weights load."""
    path = runner_checkpoint('dinov3', tmp_path)
    result = convert_to_student(
        str(path), str(tmp_path / 'out'), operator='gla', num_heads=2
    )
    config = Config.fromfile(result['config'])
    for net in ('student', 'teacher'):
        backbone = config.model[net].backbone
        assert backbone.rope_cfg == TRAINED_BACKBONES['dinov3']['rope_cfg']
        assert backbone.pos_embed_type == 'none', net
        assert backbone.norm_cfg.eps == 1e-5, net


def test_a_checkpoint_a_runner_saved_converts_with_its_rope(
    repo_root, fashion_mnist_root, tmp_path
):
    """A softmax DINOv3-shaped model trained one epoch on Fashion-MNIST
    by a real Runner: its epoch checkpoint converts with its RoPE, and
    the teacher built from the written config loads it."""
    init_default_scope('mmpretrain')
    cfg = Config.fromfile(
        osp.join(repo_root, 'tests/data/configs/tiny_softmax_fmnist.py')
    )
    cfg.model.backbone.update(
        type='LinearVisionTransformer',
        attn_cfg=dict(type='SoftmaxAttention'),
        **TRAINED_BACKBONES['dinov3'],
    )
    cfg.train_dataloader.dataset.data_root = fashion_mnist_root
    cfg.val_dataloader.dataset.data_root = fashion_mnist_root
    cfg.train_cfg = dict(by_epoch=True, max_epochs=1)
    cfg.param_scheduler = [dict(type='ConstantLR', factor=1.0)]
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.test_cfg = cfg.test_dataloader = cfg.test_evaluator = None
    cfg.work_dir = str(tmp_path / 'work')
    train_from_cfg(cfg)
    result = convert_to_student(
        str(tmp_path / 'work' / 'epoch_1.pth'),
        str(tmp_path / 'out'),
        operator='gla',
        dataset='fashion-mnist',
    )
    assert result['arch'].num_heads == 2  # 32 wide: the config's count
    assert result['arch'].rope == TRAINED_BACKBONES['dinov3']['rope_cfg']
    teacher = Config.fromfile(result['config']).model.teacher.backbone
    assert teacher.pos_embed_type == 'none' and teacher.norm_cfg.eps == 1e-5
