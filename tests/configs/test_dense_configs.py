"""Dense configs (MMSegmentation / MMDetection): every one parses in its
scope and builds its ViT-B model; every one initialises its model from
synthetic checkpoints in the real formats, and the UperNet and Mask R-CNN
take a training step (forward + backward) with every registered linear
operator (the ViT-B configs narrowed to width 64 for these two: same
modules, same wiring, less memory and time)."""

import copy
import os.path as osp

import pytest
import torch
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import DefaultScope

pytest.importorskip('mmseg')
pytest.importorskip('mmdet')

from dense_samples import det_batch, seg_batch  # noqa: E402
from mmengine.registry import MODELS as ROOT_MODELS  # noqa: E402
from mmpretrain.models.utils import resize_pos_embed  # noqa: E402
from mmpretrain.registry import HOOKS  # noqa: E402
from mmpretrain.registry import MODELS as PRETRAIN_MODELS  # noqa: E402
from test_configs import DENSE_EXPERIMENTS, ROOT, load  # noqa: E402

from mmlvit.models.attentions import registered_operators  # noqa: E402

UPERNET = (
    'configs/dense/upernet_vit-b_gla_mlpcopy-distill_ade20k-512x512-160k.py'
)
MASK_RCNN = 'configs/dense/mask-rcnn_vit-b_gla_mlpcopy-distill_coco-1x.py'
DISTILLER = 'mmpretrain.DenseAttentionDistiller'


SMALL = dict(
    embed_dims=64, num_layers=12, num_heads=4, feedforward_channels=128
)


def narrow(cfg):
    """The config with its ViT-B (width 768) backbones, teacher included,
    at width 64: the neck and head inputs follow."""
    model = cfg.model
    for node in (model, model.get('student', {})):
        backbone = node.get('backbone')
        if backbone and backbone.get('arch') == 'b':
            backbone.arch = SMALL
            neck = node.neck
            if neck.type == 'MultiLevelNeck':
                neck.in_channels = [64] * 4
                neck.out_channels = 64
                node.decode_head.update(in_channels=[64] * 4, channels=32)
                node.auxiliary_head.update(in_channels=64, channels=32)
            else:
                neck.in_channels = 64
    if model.get('teacher', {}).get('arch') == 'b':
        model.teacher.arch = SMALL
    return cfg


def build(cfg, model_cfg=None):
    """The config's model, built in the config's scope (SyncBN reverted as
    the Runner does on one process)."""
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = ROOT_MODELS.build(model_cfg or cfg.model)
    return revert_sync_batchnorm(model)


@pytest.fixture(scope='module')
def softmax_checkpoint(tmp_path_factory):
    """checkpoint(backbone_cfg) -> a synthetic mmpretrain checkpoint of the
    softmax ViT classifier with that backbone (one file per backbone)."""
    folder = tmp_path_factory.mktemp('softmax')
    paths = {}

    def checkpoint(backbone_cfg):
        key = repr(backbone_cfg)
        if key not in paths:
            paths[key] = str(folder / f'softmax{len(paths)}.pth')
            with PRETRAIN_MODELS.switch_scope_and_registry(
                'mmpretrain'
            ) as registry:
                torch.manual_seed(len(paths))
                model = registry.build(
                    dict(type='ImageClassifier', backbone=backbone_cfg)
                )
            torch.save({'state_dict': model.state_dict()}, paths[key])
        return paths[key]

    return checkpoint


def test_dense_experiments_state_scope_runtime_and_data():
    assert len(DENSE_EXPERIMENTS) >= 16
    for path in DENSE_EXPERIMENTS:
        cfg = load(path)
        assert cfg.default_scope in ('mmseg', 'mmdet'), path
        assert 'mmlvit' in cfg.custom_imports.imports, path
        for split in ('train', 'val', 'test'):
            assert f'{split}_dataloader' in cfg, path
        assert cfg.default_hooks.checkpoint.type == (
            'mmpretrain.SafeCheckpointHook'
        ), path
        assert cfg.default_hooks.strict_load.type == (
            'mmpretrain.StrictLoadHook'
        ), path


@pytest.mark.parametrize(
    'path', [p for p in DENSE_EXPERIMENTS if p.startswith('configs/dense/')]
)
def test_vit_b_model_builds(path):
    """The configs' models at full size (a distiller's student: its teacher
    needs a ViT-B checkpoint, built at width 64 below)."""
    cfg = load(path)
    model_cfg = cfg.model.get('student', cfg.model)
    model = build(cfg, model_cfg)
    backbone = model.backbone
    # ViT-B, or ViT-S/14 for the DINOv2-S configs.
    width, params = (384, 21e6) if '_vit-s14-' in path else (768, 85e6)
    assert (backbone.embed_dims, backbone.num_layers) == (width, 12)
    assert sum(p.numel() for p in backbone.parameters()) > params
    del model


@pytest.mark.parametrize('path', DENSE_EXPERIMENTS)
def test_model_builds_and_initialises(path, softmax_checkpoint, tmp_path):
    """Each config's model with its initialisation: a distiller's teacher
    from a softmax checkpoint, a student backbone from a classification
    checkpoint (init_cfg), a softmax checkpoint through the init hook; the
    neck and heads keep their fresh weights."""
    cfg = narrow(load(path))
    model_cfg = cfg.model
    distiller = model_cfg.type == DISTILLER
    if distiller:
        model_cfg.teacher_checkpoint = softmax_checkpoint(model_cfg.teacher)
    segmentor_cfg = model_cfg.student if distiller else model_cfg
    backbone_cfg = segmentor_cfg.backbone
    init = backbone_cfg.get('init_cfg')
    if init is not None:
        # A student of the classification pipeline (224 px, as on
        # ImageNet): a classifier checkpoint of the same backbone,
        # synthesised.
        classifier = PRETRAIN_MODELS.build(
            dict(
                type='ImageClassifier',
                backbone={
                    k: v for k, v in backbone_cfg.items() if k != 'init_cfg'
                }
                | dict(img_size=224),
            )
        )
        torch.save(
            {'state_dict': classifier.state_dict()}, tmp_path / 'student.pth'
        )
        init.checkpoint = str(tmp_path / 'student.pth')
    model = build(cfg)
    model.init_weights()
    segmentor = model.student if distiller else model
    fresh = copy.deepcopy(
        {
            k: v
            for k, v in segmentor.state_dict().items()
            if not k.startswith('backbone.')
        }
    )
    if init is not None:
        # Every tensor as the classifier has it, the position embedding
        # resized from the 14 x 14 grid to the dense one.
        dense = segmentor.backbone.state_dict()
        for key, value in classifier.backbone.state_dict().items():
            if key == 'pos_embed':
                value = resize_pos_embed(
                    value,
                    (14, 14),
                    segmentor.backbone.patch_resolution,
                    mode='bicubic',
                    num_extra_tokens=segmentor.backbone.num_extra_tokens,
                )
            assert dense[key].shape == value.shape, key
            assert torch.allclose(dense[key], value, atol=1e-6), key
    for hook_cfg in cfg.get('custom_hooks', []):
        hook_cfg = dict(hook_cfg)
        if hook_cfg.get('checkpoint') and not osp.isfile(
            osp.join(ROOT, hook_cfg['checkpoint'])
        ):
            # A softmax DeiT-B-like checkpoint (224 px), synthesised.
            hook_cfg['checkpoint'] = softmax_checkpoint(
                dict(
                    type='VisionTransformer',
                    arch=SMALL,
                    img_size=224,
                    patch_size=16,
                )
            )
        elif hook_cfg.get('checkpoint'):
            hook_cfg['checkpoint'] = osp.join(ROOT, hook_cfg['checkpoint'])
        hook = HOOKS.build(hook_cfg)
        report = hook.initialise(model, model_cfg.get('teacher_checkpoint'))
        copied = {r.key for r in report.records if r.action == 'copied'}
        assert copied and all(k.startswith('backbone.') for k in copied)
    for key, value in segmentor.state_dict().items():
        if key in fresh:
            assert torch.equal(value, fresh[key]), key


@pytest.mark.parametrize('operator', sorted(registered_operators(True)))
@pytest.mark.parametrize('path', [UPERNET, MASK_RCNN])
def test_model_trains_a_step_with_every_operator(path, operator):
    cfg = narrow(load(path))
    cfg.model.backbone.attn_cfg = dict(type=operator)
    cfg.model.backbone.pop('init_cfg')
    torch.manual_seed(0)
    model = build(cfg).train()
    make_batch = seg_batch if cfg.default_scope == 'mmseg' else det_batch
    inputs, samples = make_batch(model, size=2, hw=64)
    losses = model(inputs, samples, mode='loss')
    total, _ = model.parse_losses(losses)
    total.backward()
    assert torch.isfinite(total)
    layers = model.backbone.layers
    for name, param in [
        ('first block', layers[0].attn.proj.weight),
        ('last block', layers[-1].ffn.layers[1].weight),
    ]:
        assert param.grad is not None and param.grad.abs().sum() > 0, name
