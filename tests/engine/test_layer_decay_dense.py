"""Layer-wise learning-rate decay for segmentors, detectors and a distiller
wrapping them: BackboneLayerDecayOptimWrapperConstructor (and its
MMSegmentation names) from the optim_wrapper config."""

import pytest
import torch
from mmengine.config import ConfigDict
from mmengine.optim import build_optim_wrapper
from mmengine.registry import MODELS as ROOT_MODELS
from mmengine.registry import DefaultScope
from mmpretrain.registry import MODELS as PRETRAIN_MODELS
from tiny_segmentors import encoder_decoder, uper_head

import mmlvit  # noqa: F401

pytestmark = pytest.mark.filterwarnings(
    'ignore:``build_loss`` would be deprecated:UserWarning'
)

TINY = dict(embed_dims=32, num_layers=3, num_heads=2, feedforward_channels=64)
NUM_LAYERS = TINY['num_layers']
BASE_LR, WD, RATE = 1.0, 0.05, 0.5
BACKBONE = dict(
    type='mmpretrain.LinearVisionTransformer',
    arch=TINY,
    img_size=32,
    patch_size=16,
    out_indices=(-1,),
    out_type='featmap',
    attn_cfg=dict(type='GatedLinearAttention'),
)
NECK = dict(type='mmpretrain.SimpleFPN', in_channels=32, out_channels=16)
CONSTRUCTOR = 'mmpretrain.BackboneLayerDecayOptimWrapperConstructor'
LAYER, STAGE = 'layer_wise', 'stage_wise'  # MMSegmentation's decay types


def segmentor_cfg(**backbone):
    return encoder_decoder(dict(BACKBONE, **backbone), NECK, uper_head(16))


def detector_cfg():
    return dict(
        type='RPN',
        data_preprocessor=dict(type='DetDataPreprocessor'),
        backbone=BACKBONE,
        neck=dict(NECK, num_outs=5),
        rpn_head=dict(
            type='RPNHead',
            in_channels=16,
            feat_channels=16,
            anchor_generator=dict(
                type='AnchorGenerator',
                scales=[8],
                ratios=[0.5, 1.0, 2.0],
                strides=[4, 8, 16, 32, 64],
            ),
            bbox_coder=dict(type='DeltaXYWHBBoxCoder'),
        ),
        train_cfg=None,
        test_cfg=ConfigDict(
            rpn=dict(
                nms_pre=100,
                max_per_img=10,
                nms=dict(type='nms', iou_threshold=0.7),
                min_bbox_size=0,
            )
        ),
    )


def build(scope, cfg):
    pytest.importorskip(scope)
    with DefaultScope.overwrite_default_scope(scope):
        with ROOT_MODELS.switch_scope_and_registry(scope) as registry:
            return registry.build(cfg)


def param_groups(scope, model, constructor=CONSTRUCTOR, **paramwise_cfg):
    """{parameter name: its group} of the optimizer the config builds."""
    cfg = dict(
        optimizer=dict(type='AdamW', lr=BASE_LR, weight_decay=WD),
        constructor=constructor,
        paramwise_cfg=paramwise_cfg or dict(layer_decay_rate=RATE),
    )
    with DefaultScope.overwrite_default_scope(scope):
        wrapper = build_optim_wrapper(model, cfg)
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {}
    for group in wrapper.optimizer.param_groups:
        for param in group['params']:
            assert names[id(param)] not in groups
            groups[names[id(param)]] = group
    return groups


def expected_lr(name, backbone_prefix='backbone.'):
    """base_lr * rate ** (num_layers + 1 - depth) in the backbone, base_lr
    elsewhere."""
    if not name.startswith(backbone_prefix):
        return BASE_LR
    name = name[len(backbone_prefix) :]
    if name.startswith(('patch_embed.', 'cls_token', 'pos_embed')):
        depth = 0
    elif name.startswith('layers.'):
        depth = int(name.split('.')[1]) + 1
    else:  # the final norm
        depth = NUM_LAYERS + 1
    return BASE_LR * RATE ** (NUM_LAYERS + 1 - depth)


def assert_decayed(
    model, groups, backbone_prefix='backbone.', num_depths=NUM_LAYERS + 2
):
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert set(groups) == trainable
    for name, group in groups.items():
        assert group['lr'] == pytest.approx(
            expected_lr(name, backbone_prefix)
        ), name
    # Every depth is there, the operator's own parameters included.
    lrs = {g['lr'] for n, g in groups.items() if n.startswith(backbone_prefix)}
    assert len(lrs) == num_depths
    gate = f'{backbone_prefix}layers.{NUM_LAYERS - 1}.attn.gate_up.weight'
    assert groups[gate]['lr'] == pytest.approx(RATE)


@pytest.mark.parametrize(
    'scope,cfg', [('mmseg', segmentor_cfg), ('mmdet', detector_cfg)]
)
def test_backbone_params_decay_and_the_rest_get_the_base_lr(scope, cfg):
    model = build(scope, cfg())
    groups = param_groups(scope, model)
    assert_decayed(model, groups)
    assert groups['neck.lateral_convs.0.conv.weight']['lr'] == BASE_LR
    heads = ('decode_head', 'bbox_head')
    head = next(n for n in groups if n.startswith(heads))
    assert groups[head]['lr'] == BASE_LR


def test_mmpretrain_constructor_needs_a_model_with_get_layer_depth():
    # Why the constructor above exists: mmpretrain's asks the segmentor.
    model = build('mmseg', segmentor_cfg())
    with pytest.raises(NotImplementedError, match='get_layer_depth'):
        param_groups(
            'mmseg',
            model,
            constructor='mmpretrain.LearningRateDecayOptimWrapperConstructor',
        )


@pytest.mark.parametrize(
    'constructor,paramwise_cfg',
    [
        (
            'mmpretrain.LearningRateDecayOptimizerConstructor',
            dict(num_layers=NUM_LAYERS, decay_rate=RATE, decay_type=LAYER),
        ),
        (
            'mmpretrain.LayerDecayOptimizerConstructor',
            dict(num_layers=NUM_LAYERS, layer_decay_rate=RATE),
        ),
    ],
)
def test_mmseg_names_and_paramwise_cfg(constructor, paramwise_cfg):
    model = build('mmseg', segmentor_cfg())
    groups = param_groups('mmseg', model, constructor, **paramwise_cfg)
    assert_decayed(model, groups)
    # As in MMSegmentation: no weight decay on 1-D parameters.
    params = dict(model.named_parameters())
    for name, group in groups.items():
        assert group['weight_decay'] == (0.0 if params[name].ndim == 1 else WD)


@pytest.mark.parametrize(
    'paramwise_cfg,message',
    [
        (dict(num_layers=12, decay_rate=RATE), 'num_layers=12 but backbone'),
        (
            dict(num_layers=NUM_LAYERS, decay_rate=RATE, decay_type=STAGE),
            'decays by block',
        ),
    ],
)
def test_mmseg_paramwise_cfg_errors(paramwise_cfg, message):
    model = build('mmseg', segmentor_cfg())
    with pytest.raises(ValueError, match=message):
        param_groups('mmseg', model, **paramwise_cfg)


def test_frozen_stages_get_no_group():
    model = build('mmseg', segmentor_cfg(frozen_stages=1))
    groups = param_groups('mmseg', model)
    assert 'backbone.layers.0.ln1.weight' not in groups
    assert_decayed(model, groups, num_depths=NUM_LAYERS)


def test_distiller_decays_the_students_backbone(tmp_path):
    pytest.importorskip('mmseg')
    torch.manual_seed(0)
    teacher = dict(
        type='VisionTransformer', arch=TINY, img_size=32, patch_size=16
    )
    vit = PRETRAIN_MODELS.build(teacher)
    vit.init_weights()
    checkpoint = tmp_path / 'teacher.pth'
    state = {f'backbone.{k}': v for k, v in vit.state_dict().items()}
    torch.save(dict(state_dict=state), checkpoint)
    model = build(
        'mmseg',
        dict(
            type='mmpretrain.DenseAttentionDistiller',
            student=segmentor_cfg(),
            teacher=teacher,
            teacher_checkpoint=str(checkpoint),
        ),
    )
    groups = param_groups('mmseg', model)
    assert not any(n.startswith('teacher.') for n in groups)
    assert_decayed(model, groups, backbone_prefix='student.backbone.')
    assert groups['student.neck.lateral_convs.0.conv.weight']['lr'] == BASE_LR


def test_classifier_groups_equal_mmpretrains():
    # A model with its own get_layer_depth is left to mmpretrain's rules.
    cfg = dict(
        type='ImageClassifier',
        backbone=dict(BACKBONE, type='LinearVisionTransformer', out_type=None),
        head=dict(type='LinearClsHead', num_classes=3, in_channels=32),
    )
    model = PRETRAIN_MODELS.build(cfg)
    ours = param_groups('mmpretrain', model)
    theirs = param_groups(
        'mmpretrain', model, 'LearningRateDecayOptimWrapperConstructor'
    )
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert ours[name]['lr'] == theirs[name]['lr'], name
        assert ours[name]['weight_decay'] == theirs[name]['weight_decay']
    assert_decayed(model, ours)
