"""SimpleFPN: ViTDet's simple feature pyramid on a LinearVisionTransformer,
alone and inside an mmdet Mask R-CNN and an mmseg segmentor."""

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import MODELS as ROOT_MODELS
from mmengine.registry import DefaultScope
from mmpretrain.models.utils import LayerNorm2d
from tiny_segmentors import encoder_decoder, uper_head

import mmlvit  # noqa: F401
from mmlvit.models.backbones import LinearVisionTransformer
from mmlvit.models.necks import SimpleFPN

pytestmark = [
    pytest.mark.filterwarnings(
        'ignore:``build_loss`` would be deprecated:UserWarning'
    ),
    pytest.mark.usefixtures('one_thread'),
]
TINY = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)
BACKBONE = dict(
    type='mmpretrain.LinearVisionTransformer',
    arch=TINY,
    img_size=64,
    patch_size=16,
    out_indices=(1,),
    out_type='featmap',
    drop_path_rate=0.1,
    attn_cfg=dict(type='GatedLinearAttention'),
)
NECK = dict(type='mmpretrain.SimpleFPN', in_channels=32, out_channels=16)


def test_levels_at_strides_4_to_64_of_a_vit():
    torch.manual_seed(0)
    vit = LinearVisionTransformer(
        **{k: v for k, v in BACKBONE.items() if k != 'type'}
    )
    neck = SimpleFPN(in_channels=32, out_channels=16, num_outs=5)
    image = torch.randn(2, 3, 128, 192)  # stride-16 map: 8 x 12
    outs = neck(vit(image))
    assert [tuple(o.shape) for o in outs] == [
        (2, 16, 128 // s, 192 // s) for s in (4, 8, 16, 32, 64)
    ]


def test_shapes_at_odd_sizes_and_the_extra_level():
    neck = SimpleFPN(in_channels=32, out_channels=16, num_outs=6)
    x = torch.randn(2, 32, 5, 7)
    outs = neck((x,))
    assert [tuple(o.shape[2:]) for o in outs] == [
        (20, 28),
        (10, 14),
        (5, 7),
        (2, 3),  # 2x2 max pooling floors
        (1, 2),  # extra levels: stride-2 subsampling (ceil)
        (1, 1),
    ]
    torch.testing.assert_close(outs[4], outs[3][..., ::2, ::2])
    torch.testing.assert_close(outs[5], outs[4][..., ::2, ::2])
    # A bare map is the same as a tuple ending with it.
    bare = neck(x)
    other = torch.randn_like(x)
    for a, b, c in zip(outs, bare, neck((other, x))):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(a, c)


def test_branches_follow_vitdet():
    neck = SimpleFPN(in_channels=32, out_channels=16)
    up4, up2, same, down = neck.branches
    assert [type(m).__name__ for m in up4] == [
        'ConvTranspose2d',
        'LayerNorm2d',
        'GELU',
        'ConvTranspose2d',
    ]
    assert (up4[0].out_channels, up4[3].out_channels) == (16, 8)
    assert up4[0].stride == up4[3].stride == (2, 2)
    assert up2.out_channels == 16 and up2.stride == (2, 2)
    assert type(same).__name__ == 'Identity'
    assert (down.kernel_size, down.stride) == (2, 2)
    assert [c.conv.in_channels for c in neck.lateral_convs] == [8, 16, 32, 32]
    for lateral, output in zip(neck.lateral_convs, neck.output_convs):
        assert lateral.conv.kernel_size == (1, 1)
        assert output.conv.kernel_size == (3, 3)
        assert output.conv.padding == (1, 1)
        for conv in (lateral, output):
            assert isinstance(conv.norm, LayerNorm2d)
            assert not conv.with_activation
            assert conv.conv.bias is None  # the norm has the bias


def test_gradients_reach_every_parameter_and_the_input():
    torch.manual_seed(0)
    neck = SimpleFPN(in_channels=32, out_channels=16, num_outs=5)
    x = torch.randn(2, 32, 5, 7, requires_grad=True)
    sum(o.square().mean() for o in neck((x,))).backward()
    for name, param in neck.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    assert x.grad.abs().sum() > 0


@pytest.mark.parametrize(
    'kwargs,message',
    [
        (dict(scale_factors=(4, 3)), 'scale_factors must be taken from'),
        (dict(num_outs=3), 'num_outs=3 is smaller than the 4 scale factors'),
    ],
)
def test_wrong_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SimpleFPN(in_channels=32, out_channels=16, **kwargs)


def test_subset_of_scales_and_sequence_in_channels():
    neck = SimpleFPN(
        in_channels=[32, 32], out_channels=16, scale_factors=(2, 1)
    )
    outs = neck((torch.randn(1, 32, 4, 6),))
    assert [tuple(o.shape) for o in outs] == [(1, 16, 8, 12), (1, 16, 4, 6)]


@pytest.mark.parametrize('scope', ['mmdet', 'mmseg', 'mmpretrain'])
def test_builds_under_the_callers_scope(scope):
    pytest.importorskip(scope)
    with DefaultScope.overwrite_default_scope(scope):
        with ROOT_MODELS.switch_scope_and_registry(scope) as registry:
            neck = registry.build(dict(NECK, num_outs=5))
    assert isinstance(neck, SimpleFPN)
    assert isinstance(neck.lateral_convs[0].norm, LayerNorm2d)


def mask_rcnn_config(tmp_path):
    """mmdet's Mask R-CNN (its base config, read as a user's config
    inherits it) with the ViT + SimpleFPN at toy widths."""
    path = tmp_path / 'mask_rcnn.py'
    path.write_text("_base_ = 'mmdet::_base_/models/mask-rcnn_r50_fpn.py'\n")
    cfg = Config.fromfile(path).model
    cfg.backbone = BACKBONE
    cfg.neck = dict(NECK, num_outs=5)
    cfg.rpn_head.update(in_channels=16, feat_channels=16)
    roi = cfg.roi_head
    roi.bbox_roi_extractor.out_channels = 16
    roi.mask_roi_extractor.out_channels = 16
    roi.bbox_head.update(in_channels=16, fc_out_channels=32, num_classes=3)
    roi.mask_head.update(
        in_channels=16, conv_out_channels=16, num_convs=1, num_classes=3
    )
    cfg.train_cfg.rpn.sampler.num = 64
    cfg.train_cfg.rpn_proposal.update(nms_pre=200, max_per_img=50)
    cfg.train_cfg.rcnn.sampler.num = 32
    return cfg


def detection_batch(num_images, size):
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData

    H, W = size
    inputs, samples = [], []
    for _ in range(num_images):
        inputs.append(torch.randint(0, 256, (3, H, W), dtype=torch.uint8))
        sample = DetDataSample(
            metainfo=dict(
                img_shape=(H, W), ori_shape=(H, W), scale_factor=(1.0, 1.0)
            )
        )
        boxes = torch.tensor([[4.0, 6.0, 40.0, 50.0], [30.0, 10, 90, 60]])
        masks = torch.zeros(2, H, W, dtype=torch.uint8)
        for mask, (x1, y1, x2, y2) in zip(masks, boxes.int().tolist()):
            mask[y1:y2, x1:x2] = 1
        sample.gt_instances = InstanceData(
            bboxes=boxes,
            labels=torch.tensor([0, 2]),
            masks=BitmapMasks(masks.numpy(), H, W),
        )
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


def test_mask_rcnn_trains(tmp_path):
    pytest.importorskip('mmdet')
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules

    register_all_modules(init_default_scope=False)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmdet'):
        model = MODELS.build(mask_rcnn_config(tmp_path))
        model.init_weights()
        model.train()
        data = model.data_preprocessor(detection_batch(2, (70, 100)), True)
        assert data['inputs'].shape == (2, 3, 96, 128)  # padded to 32
        feats = model.extract_feat(data['inputs'])
        assert [tuple(f.shape[2:]) for f in feats] == [
            (24, 32),
            (12, 16),
            (6, 8),
            (3, 4),
            (2, 2),
        ]
        losses = model(**data, mode='loss')
    for key in ('loss_rpn_cls', 'loss_cls', 'loss_bbox', 'loss_mask'):
        assert key in losses
    loss, _ = model.parse_losses(losses)
    assert torch.isfinite(loss)
    loss.backward()
    for module in (model.backbone.layers[0].attn, model.neck.branches[0]):
        grads = [p.grad for p in module.parameters()]
        assert all(g is not None and g.abs().sum() > 0 for g in grads)


def test_segmentor_with_simple_fpn_trains():
    pytest.importorskip('mmseg')
    from mmengine.structures import PixelData
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample

    cfg = encoder_decoder(
        BACKBONE, dict(NECK, num_outs=4), uper_head(16), size_divisor=16
    )
    H, W = 50, 70
    samples = [
        SegDataSample(
            metainfo=dict(img_shape=(H, W)),
            gt_sem_seg=PixelData(data=torch.randint(0, 3, (1, H, W))),
        )
        for _ in range(2)
    ]
    images = [torch.randint(0, 256, (3, H, W), dtype=torch.uint8)] * 2
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(cfg)
        model.train()
        data = model.data_preprocessor(
            dict(inputs=images, data_samples=samples), True
        )
        losses = model(**data, mode='loss')
    loss = sum(v for k, v in losses.items() if 'loss' in k)
    loss.backward()
    assert torch.isfinite(loss)
    assert model.neck.branches[0][0].weight.grad.abs().sum() > 0
