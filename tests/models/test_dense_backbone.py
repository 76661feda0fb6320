"""LinearVisionTransformer as a dense-prediction backbone: multi-level
feature maps at any input size, frozen stages, and a segmentor (mmseg) built
around it."""

import math

import pytest
import torch
from mmengine.registry import DefaultScope
from mmpretrain.models import VisionTransformer
from mmpretrain.models.utils import resize_pos_embed
from tiny_segmentors import encoder_decoder, uper_head

import mmlvit  # noqa: F401
from mmlvit.models.attentions import registered_operators
from mmlvit.models.backbones import (
    LinearVisionTransformer,
    sincos_position_embedding,
)

pytestmark = [
    pytest.mark.filterwarnings(
        'ignore:``build_loss`` would be deprecated:UserWarning'
    ),
    pytest.mark.usefixtures('one_thread'),
]
TINY = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)
PATCH = 8
DENSE = dict(
    arch=TINY,
    img_size=32,
    patch_size=PATCH,
    out_indices=(0, 1),
    out_type='featmap',
)
# Non-square, neither side a multiple of the patch size.
SIZES = [(37, 50), (20, 9)]
OPERATORS = registered_operators()


def grid(size):
    """The patch grid of an image: corner padding to whole patches."""
    return tuple(math.ceil(s / PATCH) for s in size)


@pytest.mark.parametrize('pos_embed_type', ['learned', 'sincos'])
@pytest.mark.parametrize('operator', OPERATORS)
def test_featmaps_at_any_size(operator, pos_embed_type):
    torch.manual_seed(0)
    model = LinearVisionTransformer(
        **DENSE, attn_cfg=dict(type=operator), pos_embed_type=pos_embed_type
    )
    for size in SIZES:
        outs = model(torch.randn(2, 3, *size))
        assert [tuple(o.shape) for o in outs] == [(2, 32, *grid(size))] * 2
        assert all(torch.isfinite(o).all() for o in outs)
    model.zero_grad()
    sum(o.square().mean() for o in outs).backward()
    assert model.patch_embed.projection.weight.grad.abs().sum() > 0


@pytest.mark.parametrize('pos_embed_type', ['learned', 'sincos'])
def test_position_embedding_follows_the_grid(pos_embed_type):
    # What the first block sees is patch embedding + the position embedding
    # of the input's own (non-square) grid.
    torch.manual_seed(0)
    model = LinearVisionTransformer(
        **DENSE,
        attn_cfg=dict(type='MHLAttention'),
        pos_embed_type=pos_embed_type,
    )
    model.init_weights()
    seen = {}
    model.layers[0].register_forward_pre_hook(
        lambda module, args: seen.update(x=args[0])
    )
    x = torch.randn(1, 3, 37, 50)
    model(x)
    patches, hw = model.patch_embed(x)
    assert hw == grid((37, 50)) == (5, 7)
    if pos_embed_type == 'learned':
        expected = resize_pos_embed(model.pos_embed, (4, 4), hw, 'bicubic', 0)
    else:
        expected = sincos_position_embedding(hw, 32)
    torch.testing.assert_close(seen['x'] - patches, expected)


def test_softmax_featmaps_equal_mmpretrain_vit_at_another_size():
    # Same weights: the learned position embedding is resized (bicubic) and
    # the image corner-padded exactly as mmpretrain's ViT does.
    torch.manual_seed(0)
    vit = VisionTransformer(**DENSE)
    vit.init_weights()
    lvit = LinearVisionTransformer(
        **DENSE, attn_cfg=dict(type='SoftmaxAttention')
    )
    lvit.load_state_dict(vit.state_dict(), strict=True)
    vit.eval()
    lvit.eval()
    x = torch.randn(2, 3, 37, 50)
    with torch.no_grad():
        expected, got = vit(x), lvit(x)
    assert got[0].shape == (2, 32, 5, 7)
    for a, b in zip(expected, got):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_final_norm_applies_to_the_last_layer_only():
    arch = dict(TINY, num_layers=3)
    torch.manual_seed(0)
    model = LinearVisionTransformer(
        **dict(DENSE, arch=arch, out_indices=(0, 1, 2)),
        attn_cfg=dict(type='GatedLinearAttention'),
    )
    model.eval()
    x = torch.randn(2, 3, 37, 50)
    with torch.no_grad():
        outs = model(x)
        model.out_indices = [0, 1]  # without the last layer
        inner = model(x)
    # The final LayerNorm (unit weight, zero bias) normalises over channels.
    last = outs[2]
    torch.testing.assert_close(
        last.mean(1), torch.zeros_like(last.mean(1)), atol=1e-4, rtol=0
    )
    torch.testing.assert_close(
        last.var(1, unbiased=False),
        torch.ones_like(last.var(1)),
        atol=1e-3,
        rtol=0,
    )
    assert outs[1].mean(1).abs().max() > 1e-2
    assert len(inner) == 2
    for a, b in zip(outs[:2], inner):
        torch.testing.assert_close(a, b)


def test_out_indices_as_an_mmseg_style_tuple():
    # A config's tuple (negative entries too) is read, never written.
    out_indices = (-2, -1)
    model = LinearVisionTransformer(
        **dict(DENSE, out_indices=out_indices),
        attn_cfg=dict(type='ReLULinearAttention'),
    )
    assert list(model.out_indices) == [0, 1]
    as_list = [-1]
    LinearVisionTransformer(
        **dict(DENSE, out_indices=as_list),
        attn_cfg=dict(type='ReLULinearAttention'),
    )
    assert as_list == [-1]


@pytest.mark.parametrize('operator', ['GatedLinearAttention', 'TTTAttention'])
def test_frozen_stages_stay_frozen_in_training(operator):
    model = LinearVisionTransformer(
        **dict(DENSE, out_indices=(0,)),
        frozen_stages=1,
        drop_rate=0.3,
        drop_path_rate=0.9,
        attn_cfg=dict(type=operator),
    )
    model.train()
    assert not model.patch_embed.training
    assert not model.layers[0].training and model.layers[1].training
    # No dropout or drop path in the frozen stem and layer 0.
    x = torch.randn(2, 3, 37, 50)
    torch.manual_seed(1)
    first = model(x)[0]
    torch.manual_seed(2)
    torch.testing.assert_close(model(x)[0], first)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert 'patch_embed.projection.weight' in frozen
    assert any(n.startswith('layers.0.attn.') for n in frozen)
    assert not any(n.startswith('layers.1.') for n in frozen)


def test_layer_depths_cover_the_operators_parameters():
    model = LinearVisionTransformer(
        **DENSE, attn_cfg=dict(type='GatedLinearAttention')
    )
    for name, _ in model.named_parameters():
        depth, num_depths = model.get_layer_depth(name)
        assert num_depths == TINY['num_layers'] + 2
        if name.startswith('layers.'):
            assert depth == int(name.split('.')[1]) + 1, name
        elif name.startswith(('patch_embed', 'cls_token', 'pos_embed')):
            assert depth == 0, name
        else:
            assert depth == num_depths - 1, name
    assert model.get_layer_depth('layers.1.attn.gate_up.weight') == (2, 4)


def test_segmentor_with_uperhead_trains():
    pytest.importorskip('mmseg')
    from mmengine.structures import PixelData
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample

    cfg = encoder_decoder(
        dict(
            type='mmpretrain.LinearVisionTransformer',
            **dict(
                DENSE, arch=dict(TINY, num_layers=4), out_indices=(0, 1, 2, 3)
            ),
            drop_path_rate=0.1,
            attn_cfg=dict(type='MHLAttention'),
        ),
        dict(
            type='MultiLevelNeck',
            in_channels=[32] * 4,
            out_channels=32,
            scales=[4, 2, 1, 0.5],
        ),
        uper_head(32, pool_scales=(1, 2, 3, 6)),
        size_divisor=PATCH,
        seg_pad_val=255,
    )
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(cfg)
        model.init_weights()
        model.train()
        H, W = 37, 50
        samples = []
        for _ in range(2):
            sample = SegDataSample(metainfo=dict(img_shape=(H, W)))
            sample.gt_sem_seg = PixelData(data=torch.randint(0, 3, (1, H, W)))
            samples.append(sample)
        data = model.data_preprocessor(
            dict(
                inputs=[torch.randint(0, 256, (3, H, W)).byte()] * 2,
                data_samples=samples,
            ),
            True,
        )
        feats = model.extract_feat(data['inputs'])
        # Padded to 40 x 56: a 5 x 7 grid, rescaled by the neck.
        assert [tuple(f.shape[2:]) for f in feats] == [
            (20, 28),
            (10, 14),
            (5, 7),
            (2, 3),
        ]
        losses = model(**data, mode='loss')
    loss = sum(v for k, v in losses.items() if 'loss' in k)
    loss.backward()
    assert torch.isfinite(loss)
    grad = model.backbone.layers[0].attn.mixing.grad
    assert grad is not None and grad.abs().sum() > 0
