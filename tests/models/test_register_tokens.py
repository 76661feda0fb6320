"""LinearVisionTransformer's register tokens (DINOv2, arXiv 2309.16588):
[class, (distillation), registers, patches], registers without a
position, the feature maps dropping all of them, frozen with the stem,
refused with patch-tokens-only operators."""

import pytest
import torch
from mmpretrain.models.utils import resize_pos_embed
from mmpretrain.registry import MODELS

import mmlvit  # noqa: F401
from mmlvit.models.attentions import SoftmaxAttention

ARCH = dict(embed_dims=64, num_layers=2, num_heads=2, feedforward_channels=128)


def backbone(**kwargs):
    kwargs.setdefault('attn_cfg', dict(type='SoftmaxAttention'))
    torch.manual_seed(0)
    model = MODELS.build(
        dict(
            type='LinearVisionTransformer',
            arch=ARCH,
            img_size=32,
            patch_size=8,
            **kwargs,
        )
    )
    model.init_weights()
    return model.eval()


@pytest.mark.parametrize('dist', [False, True])
def test_token_layout_and_outputs(dist):
    model = backbone(
        num_register_tokens=3, with_dist_token=dist, out_type='raw'
    )
    prefix = 2 if dist else 1
    assert model.num_extra_tokens == prefix + 3
    assert model.num_pos_extra_tokens == prefix
    assert model.pos_embed.shape == (1, prefix + 16, 64)
    assert model.reg_token.shape == (1, 3, 64) and model.reg_token.any()
    seen = []
    model.layers[0].register_forward_pre_hook(lambda m, a: seen.append(a[0]))
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        raw = model(images)[-1]
    assert raw.shape == (2, prefix + 3 + 16, 64)
    # The registers enter the first block as learned, with no position.
    tokens = seen[0]
    assert torch.equal(
        tokens[:, prefix : prefix + 3], model.reg_token.expand(2, -1, -1)
    )
    # The class (and distillation) token and the patches have theirs.
    pos = model.pos_embed
    with torch.no_grad():
        patches = model.patch_embed(images)[0]
    torch.testing.assert_close(
        tokens[:, prefix + 3 :], patches + pos[:, prefix:]
    )
    torch.testing.assert_close(
        tokens[:, 0], (model.cls_token[:, 0] + pos[:, 0]).expand(2, -1)
    )
    model.out_type = 'featmap'
    with torch.no_grad():
        featmap = model(images)[-1]
    patches = raw[:, prefix + 3 :].transpose(1, 2).reshape(2, 64, 4, 4)
    assert torch.equal(featmap, patches)


def test_registers_are_frozen_with_the_stem_and_resized_on_load():
    frozen = backbone(num_register_tokens=2, frozen_stages=1)
    assert not frozen.reg_token.requires_grad
    # A checkpoint for another grid loads: the table is resized, the
    # registers (which have no position) are not counted as rows.
    state = backbone(num_register_tokens=2).state_dict()
    bigger = MODELS.build(
        dict(
            type='LinearVisionTransformer',
            arch=ARCH,
            img_size=48,
            patch_size=8,
            attn_cfg=dict(type='SoftmaxAttention'),
            num_register_tokens=2,
        )
    )
    bigger.load_state_dict(state)
    assert bigger.pos_embed.shape == (1, 1 + 36, 64)
    assert torch.equal(bigger.reg_token, state['reg_token'])


def test_bad_register_configurations_are_refused():
    with pytest.raises(ValueError, match='takes no register tokens'):
        backbone(
            attn_cfg=dict(type='MHLAttention'),
            num_register_tokens=4,
        )
    with pytest.raises(ValueError, match='integer from 0 to 16, got 17'):
        backbone(num_register_tokens=17)
    # A backbone's operators expect exactly its prefix tokens: one more or
    # one less does not fit the grid.
    model = backbone(num_register_tokens=4)
    attn = model.layers[0].attn
    assert attn.prefix_tokens == 5
    assert attn(torch.randn(1, 16 + 5, 64), (4, 4)).shape == (1, 21, 64)
    for extra in (4, 6):
        with pytest.raises(ValueError, match='16 patches after 5 tokens'):
            attn(torch.randn(1, 16 + extra, 64), (4, 4))
    # Alone, an operator takes a class and a distillation token at most.
    with pytest.raises(ValueError, match='after 0 or 1 or 2 tokens'):
        SoftmaxAttention(64, 2)(torch.randn(1, 16 + 3, 64), (4, 4))


def test_another_input_size_resizes_the_positions_of_non_registers():
    model = backbone(num_register_tokens=3, out_type='raw')
    table = model.position_embedding((6, 6))
    expected = resize_pos_embed(model.pos_embed, (4, 4), (6, 6), 'bicubic', 1)
    assert torch.equal(table, expected)
    with torch.no_grad():
        assert model(torch.randn(2, 3, 48, 48))[-1].shape == (2, 40, 64)


def test_layer_depths_put_every_prefix_token_and_the_pre_norm_in_the_stem():
    """Layer-wise lr decay: tokens and pre-norm at depth 0 as the class
    token, block i at i + 1, the final norm and the rest at L + 1."""
    model = backbone(
        num_register_tokens=2, with_dist_token=True, pre_norm=True
    )
    depths = {
        name: model.get_layer_depth(name)
        for name in (
            'cls_token',
            'dist_token',
            'reg_token',
            'pos_embed',
            'pre_norm.weight',
            'patch_embed.projection.weight',
            'layers.1.attn.qkv.weight',
            'ln1.weight',
        )
    }
    assert depths == {
        **{name: (0, 4) for name in list(depths)[:6]},
        'layers.1.attn.qkv.weight': (2, 4),
        'ln1.weight': (3, 4),
    }
    # Under a classifier's prefix, and outside it (a head).
    assert model.get_layer_depth('backbone.reg_token', 'backbone.') == (0, 4)
    assert model.get_layer_depth('head.fc.weight', 'backbone.') == (3, 4)
