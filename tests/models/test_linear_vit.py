"""LinearVisionTransformer: a drop-in for mmpretrain's VisionTransformer."""

import copy
import math

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner
from mmpretrain.models import VisionTransformer
from mmpretrain.models.utils import (
    build_2d_sincos_position_embedding,
    resize_pos_embed,
)
from mmpretrain.registry import MODELS, OPTIM_WRAPPER_CONSTRUCTORS
from tiny_vit import NO_CLS

import mmlvit  # noqa: F401
from mmlvit.models.attentions import registered_operators
from mmlvit.models.backbones import (
    LinearVisionTransformer,
    sincos_position_embedding,
)

SOFTMAX = dict(type='SoftmaxAttention')
TINY = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)
TINY_ARGS = dict(arch=TINY, img_size=32, patch_size=8)

OPERATORS = registered_operators()


pytestmark = pytest.mark.usefixtures('one_thread')


def build_pair(**kwargs):
    """A random VisionTransformer and a softmax LinearVisionTransformer that
    loaded its state dict strictly."""
    torch.manual_seed(0)
    vit = VisionTransformer(**TINY_ARGS, **kwargs)
    vit.init_weights()
    lvit = LinearVisionTransformer(**TINY_ARGS, **kwargs, attn_cfg=SOFTMAX)
    lvit.load_state_dict(vit.state_dict(), strict=True)
    return vit, lvit


def assert_same_outputs(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------
# Fixed sin-cos position embedding
# --------------------------------------------------------------------------


def test_sincos_matches_explicit_formula():
    H, W, C = 3, 5, 16
    got = sincos_position_embedding((H, W), C)
    assert got.shape == (1, H * W, C) and got.dtype == torch.float32
    expected = torch.empty(H * W, C, dtype=torch.float64)
    for r in range(H):
        for c in range(W):
            for i in range(C // 4):
                w = 10000.0 ** (-i / (C // 4))
                t = r * W + c
                expected[t, i] = math.sin(r * w)
                expected[t, C // 4 + i] = math.cos(r * w)
                expected[t, C // 2 + i] = math.sin(c * w)
                expected[t, 3 * C // 4 + i] = math.cos(c * w)
    torch.testing.assert_close(got[0].double(), expected, rtol=0, atol=1e-6)


def test_sincos_matches_mmpretrain_on_square_grids():
    # mmpretrain's (MAE's) table is only laid out in raster order for
    # square grids; there the two agree.
    torch.testing.assert_close(
        sincos_position_embedding((7, 7), 64),
        build_2d_sincos_position_embedding(7, 64),
    )


def test_sincos_backbone_has_no_position_parameter():
    model = LinearVisionTransformer(**TINY_ARGS, **NO_CLS, attn_cfg=SOFTMAX)
    assert model.pos_embed is None
    names = [n for n, _ in model.named_parameters()]
    names += [n for n, _ in model.named_buffers()]
    assert not any('pos' in n for n in names)
    # Recomputed for the grid of every input.
    pos = model.position_embedding((3, 5))
    torch.testing.assert_close(pos, sincos_position_embedding((3, 5), 32))
    model.eval()
    assert model(torch.randn(1, 3, 24, 40))[0].shape == (1, 32)
    # With a class token, the class token gets no position.
    with_cls = LinearVisionTransformer(
        **TINY_ARGS, pos_embed_type='sincos', attn_cfg=SOFTMAX
    )
    pos = with_cls.position_embedding((3, 5))
    assert pos.shape == (1, 16, 32) and not pos[0, 0].any()
    torch.testing.assert_close(
        pos[:, 1:], sincos_position_embedding((3, 5), 32)
    )


def test_sincos_backbone_rejects_a_learned_table():
    vit = VisionTransformer(**TINY_ARGS)
    model = LinearVisionTransformer(
        **TINY_ARGS, pos_embed_type='sincos', attn_cfg=SOFTMAX
    )
    with pytest.raises(RuntimeError, match='pos_embed'):
        model.load_state_dict(vit.state_dict())
    result = model.load_state_dict(vit.state_dict(), strict=False)
    assert result.unexpected_keys == ['pos_embed']
    assert not result.missing_keys


# --------------------------------------------------------------------------
# Softmax LinearVisionTransformer == VisionTransformer
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    'out_type,with_cls_token',
    [
        ('cls_token', True),
        ('featmap', True),
        ('featmap', False),
        ('avg_featmap', True),
        ('avg_featmap', False),
        ('raw', True),
        ('raw', False),
    ],
)
def test_softmax_student_equals_vit(out_type, with_cls_token):
    vit, lvit = build_pair(
        out_type=out_type, with_cls_token=with_cls_token, out_indices=[0, 1]
    )
    assert vit.state_dict().keys() == lvit.state_dict().keys()
    vit.eval()
    lvit.eval()
    # The training size, then a non-square grid (learned position embedding
    # resized at run time).
    for size in [(32, 32), (40, 56)]:
        x = torch.randn(2, 3, *size)
        with torch.no_grad():
            assert_same_outputs(vit(x), lvit(x))


def test_softmax_student_equals_vit_with_overlapping_patches():
    # patch_cfg reaches the patch embedding: 8 px patches every 4 px.
    vit, lvit = build_pair(
        patch_cfg=dict(stride=4),
        out_type='featmap',
        interpolate_mode='bilinear',
    )
    vit.eval()
    lvit.eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        out = lvit(x)
        assert out[0].shape == (1, 32, 8, 8)  # corner padding
        assert_same_outputs(vit(x), out)


@pytest.mark.parametrize('ffn_type', ['origin', 'swiglu_fused'])
def test_softmax_student_equals_vit_in_training(ffn_type):
    # Layer scale, dropout, stochastic depth and a pre-norm: the same random
    # draws in the same order give the same outputs and gradients.
    vit, lvit = build_pair(
        layer_scale_init_value=0.1,
        drop_rate=0.1,
        drop_path_rate=0.5,
        pre_norm=True,
        final_norm=False,
        layer_cfgs=dict(ffn_type=ffn_type),
    )
    assert 'layers.0.attn.gamma1.weight' in lvit.state_dict()
    x = torch.randn(4, 3, 32, 32)
    outputs = []
    for model in (vit, lvit):
        model.train()
        torch.manual_seed(1)
        out = model(x)[0]
        out.square().sum().backward()
        outputs.append(out)
    torch.testing.assert_close(outputs[0], outputs[1])
    grads = dict(lvit.named_parameters())
    for name, p in vit.named_parameters():
        torch.testing.assert_close(p.grad, grads[name].grad, msg=name)


def test_loads_a_vit_checkpoint_at_another_size():
    vit = VisionTransformer(**TINY_ARGS)
    vit.init_weights()
    args = dict(TINY_ARGS, img_size=48)
    lvit = LinearVisionTransformer(**args, attn_cfg=SOFTMAX)
    lvit.load_state_dict(vit.state_dict(), strict=True)
    expected = resize_pos_embed(vit.pos_embed, (4, 4), (6, 6))
    torch.testing.assert_close(lvit.pos_embed, expected)
    assert lvit.pos_embed.shape == (1, 37, 32)


def test_frozen_stages_match_vit():
    for frozen_stages in (1, 2):
        vit = VisionTransformer(**TINY_ARGS, frozen_stages=frozen_stages)
        lvit = LinearVisionTransformer(
            **TINY_ARGS, frozen_stages=frozen_stages, attn_cfg=SOFTMAX
        )
        frozen = {n for n, p in vit.named_parameters() if not p.requires_grad}
        assert {
            n for n, p in lvit.named_parameters() if not p.requires_grad
        } == frozen
        assert f'layers.{frozen_stages - 1}.attn.qkv.weight' in frozen
        assert not lvit.layers[0].training


def test_patch_grid_reaches_every_attention():
    attn_cfg = [dict(type='ReLULinearAttention'), SOFTMAX]
    model = LinearVisionTransformer(**TINY_ARGS, attn_cfg=attn_cfg)
    assert [type(layer.attn).__name__ for layer in model.layers] == [
        'ReLULinearAttention',
        'SoftmaxAttention',
    ]
    seen = []
    for layer in model.layers:
        layer.attn.register_forward_pre_hook(
            lambda module, args: seen.append((args[0].shape[1], args[1]))
        )
    for size, grid in [((32, 32), (4, 4)), ((40, 72), (5, 9))]:
        seen.clear()
        model(torch.randn(1, 3, *size))
        assert seen == [(1 + grid[0] * grid[1], grid)] * 2


def test_attention_output_excludes_layer_scale_and_drop_path():
    # What a distiller records on layers.{i}.attn is the operator output.
    model = LinearVisionTransformer(
        **TINY_ARGS,
        layer_scale_init_value=0.1,
        drop_path_rate=0.9,
        attn_cfg=SOFTMAX,
    )
    model.train()
    layer = model.layers[1]
    recorded = []
    layer.attn.register_forward_hook(
        lambda m, a, out: recorded.append((a[0], out))
    )
    model(torch.randn(2, 3, 32, 32))
    x, out = recorded[0]
    torch.testing.assert_close(out, layer.attn(x, (4, 4)))


# --------------------------------------------------------------------------
# Every operator at DeiT-T/S/B, 224 and 384 px
# --------------------------------------------------------------------------


def forward_backward(model, size):
    model.train()
    out = model(torch.randn(1, 3, size, size))[0]
    out.sum().backward()
    assert out.shape == (1, model.embed_dims)
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def build(operator, arch, variant, img_size=224):
    model = LinearVisionTransformer(
        arch=arch, img_size=img_size, **variant, attn_cfg=dict(type=operator)
    )
    assert all(type(layer.attn).__name__ == operator for layer in model.layers)
    return model


@pytest.mark.parametrize('operator', sorted(OPERATORS))
def test_operator_trains_at_deit_sizes(operator):
    # Forward+backward, batch 1: every arch at 224 px, DeiT-T at 384 px,
    # with the operator's own token layout and, where it takes a class
    # token, without one too.
    variants = [{}] if OPERATORS[operator].patch_tokens_only else [{}, NO_CLS]
    for variant in variants:
        for arch in ('deit-t', 'deit-s', 'deit-b'):
            forward_backward(build(operator, arch, variant), 224)
        forward_backward(build(operator, 'deit-t', variant, 384), 384)


@pytest.mark.parametrize('operator', sorted(OPERATORS))
def test_token_layout_follows_the_operator(operator):
    patch_only = OPERATORS[operator].patch_tokens_only
    model = LinearVisionTransformer(**TINY_ARGS, attn_cfg=dict(type=operator))
    assert model.with_cls_token is not patch_only
    assert (model.cls_token is None) is patch_only
    assert model.out_type == ('avg_featmap' if patch_only else 'cls_token')
    assert model.pos_embed_type == ('sincos' if patch_only else 'learned')
    assert (model.pos_embed is None) is patch_only
    # Explicit values win where they fit the operator.
    explicit = LinearVisionTransformer(
        **TINY_ARGS,
        out_type='featmap',
        pos_embed_type='learned',
        attn_cfg=dict(type=operator),
    )
    assert explicit.out_type == 'featmap'
    assert explicit.pos_embed is not None
    if patch_only:
        with pytest.raises(ValueError, match='takes no class token'):
            LinearVisionTransformer(
                **TINY_ARGS, with_cls_token=True, attn_cfg=dict(type=operator)
            )
        with pytest.raises(ValueError, match='mixes patch tokens only: use'):
            LinearVisionTransformer(
                **TINY_ARGS, out_type='cls_token', attn_cfg=dict(type=operator)
            )


def test_one_patch_only_layer_sets_the_layout_of_a_hybrid():
    model = LinearVisionTransformer(
        **TINY_ARGS, attn_cfg=[dict(type='MHLAttention'), SOFTMAX]
    )
    assert model.cls_token is None and model.out_type == 'avg_featmap'
    model.eval()
    assert model(torch.randn(2, 3, 32, 32))[0].shape == (2, 32)


def test_explicit_layout_equals_the_default_one_for_patch_only_operators():
    torch.manual_seed(0)
    auto = LinearVisionTransformer(
        **TINY_ARGS, attn_cfg=dict(type='TTTAttention')
    )
    explicit = LinearVisionTransformer(
        **TINY_ARGS, **NO_CLS, attn_cfg=dict(type='TTTAttention')
    )
    explicit.load_state_dict(auto.state_dict(), strict=True)
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(auto(x), explicit(x))


# --------------------------------------------------------------------------
# With mmpretrain's classifier, optimiser constructors and Runner
# --------------------------------------------------------------------------


def test_layer_wise_lr_decay():
    attn_cfg = [dict(type='MHLAttention'), SOFTMAX]
    model = MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(
                type='LinearVisionTransformer',
                **TINY_ARGS,
                **NO_CLS,
                attn_cfg=attn_cfg,
            ),
            head=dict(type='LinearClsHead', num_classes=10, in_channels=32),
        )
    )
    constructor = OPTIM_WRAPPER_CONSTRUCTORS.build(
        dict(
            type='LearningRateDecayOptimWrapperConstructor',
            optim_wrapper_cfg=dict(
                optimizer=dict(type='AdamW', lr=1.0, weight_decay=0.05)
            ),
            paramwise_cfg=dict(layer_decay_rate=0.5),
        )
    )
    wrapper = constructor(model)
    lr = {g['param_name']: g['lr'] for g in wrapper.optimizer.param_groups}
    assert len(lr) == len(list(model.parameters()))
    # Depths: stem 0, layer i -> i + 1, final norm and head 3.
    for name, value in lr.items():
        if name.startswith('backbone.patch_embed'):
            assert value == 0.5**3, name
        elif name.startswith('backbone.layers.'):
            depth = int(name.split('.')[2]) + 1
            assert value == 0.5 ** (3 - depth), name
        else:
            assert value == 1.0, name
    # The operator's own parameters decay with their layer.
    assert any(
        n.startswith('backbone.layers.0.attn.')
        and n.split('.')[-2] not in ('qkv', 'proj')
        for n in lr
    )


class RecordTraining(Hook):
    """Parameters before training and the loss of every iteration."""

    def before_train(self, runner):
        self.initial = copy.deepcopy(runner.model.state_dict())
        self.losses = []

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        self.losses.append(outputs['loss'].item())


# mmpretrain's MNIST reader warns once per label under numpy 2.
@pytest.mark.filterwarnings(
    'ignore:__array__ implementation:DeprecationWarning'
)
def test_hybrid_trains_in_a_runner(tmp_path, repo_root, fashion_mnist_root):
    # The tiny softmax Fashion-MNIST config with only the backbone type and
    # the attention config changed: ReLU linear attention, softmax last.
    cfg = Config.fromfile(
        f'{repo_root}/tests/data/configs/tiny_softmax_fmnist.py'
    )
    cfg.model.backbone.type = 'LinearVisionTransformer'
    cfg.model.backbone.attn_cfg = [dict(type='ReLULinearAttention'), SOFTMAX]
    for loader in (cfg.train_dataloader, cfg.val_dataloader):
        loader.dataset.data_root = fashion_mnist_root
    cfg.test_dataloader = cfg.test_evaluator = cfg.test_cfg = None
    cfg.param_scheduler = None
    cfg.work_dir = str(tmp_path)
    runner = Runner.from_cfg(cfg)
    record = RecordTraining()
    runner.register_hook(record)
    runner.train()

    backbone = runner.model.backbone
    assert [type(layer.attn).__name__ for layer in backbone.layers] == [
        'ReLULinearAttention',
        'SoftmaxAttention',
    ]
    assert len(record.losses) == 8
    assert all(math.isfinite(loss) for loss in record.losses)
    assert record.losses[-1] < record.losses[0]
    final = runner.model.state_dict()
    for i in range(2):
        key = f'backbone.layers.{i}.attn.qkv.weight'
        assert not torch.equal(record.initial[key], final[key]), key


# --------------------------------------------------------------------------
# Wrong configurations
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    'kwargs,error,message',
    [
        (
            dict(attn_cfg=dict(type='NoSuchAttention')),
            ValueError,
            r"'NoSuchAttention' is not a registered attention operator; known "
            r'operators: .*SoftmaxAttention',
        ),
        (
            dict(attn_cfg=dict(type='VisionTransformer')),
            ValueError,
            "'VisionTransformer' is not a registered attention operator",
        ),
        (
            dict(attn_cfg=[SOFTMAX] * 3),
            ValueError,
            'attn_cfg is a list of 3 configs but the model has 2 layers',
        ),
        (
            dict(attn_cfg=[SOFTMAX, dict(num_heads=2)]),
            ValueError,
            'attn_cfg for layer 1 must be a dict with a "type"',
        ),
        (
            dict(attn_cfg=dict(type='SoftmaxAttention', embed_dims=64)),
            ValueError,
            "sets 'embed_dims'; it comes from arch",
        ),
        (
            dict(attn_cfg='SoftmaxAttention'),
            TypeError,
            'attn_cfg must be a dict or a list of dicts, got str',
        ),
        (
            dict(arch=dict(TINY, num_heads=3), attn_cfg=SOFTMAX),
            ValueError,
            'num_heads=3 must divide embed_dims=32',
        ),
        (
            dict(pos_embed_type='rope', attn_cfg=SOFTMAX),
            ValueError,
            "Unknown pos_embed_type 'rope'",
        ),
        (
            dict(
                arch=dict(TINY, embed_dims=18, num_heads=3),
                pos_embed_type='sincos',
                attn_cfg=SOFTMAX,
            ),
            ValueError,
            'divisible by 4, got 18',
        ),
        (
            dict(layer_cfgs=dict(ffn_type='moe'), attn_cfg=SOFTMAX),
            ValueError,
            "Unknown ffn_type 'moe'",
        ),
        (
            dict(with_cls_token=False, out_type='cls_token', attn_cfg=SOFTMAX),
            ValueError,
            "out_type='cls_token' needs a class token, but "
            "with_cls_token=False: use out_type='avg_featmap'",
        ),
        (dict(), TypeError, "required keyword-only argument: 'attn_cfg'"),
    ],
)
def test_wrong_config_errors(kwargs, error, message):
    args = dict(TINY_ARGS)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        LinearVisionTransformer(**args)


def test_operators_resolve_in_mmpretrain_whatever_the_callers_scope():
    # As in an mmseg/mmdet config: the caller's scope is another library's,
    # the backbone named with its scope prefix.
    from mmengine.registry import MODELS as ROOT_MODELS
    from mmengine.registry import DefaultScope, Registry

    foreign = Registry('model', parent=ROOT_MODELS, scope='foreign_lib')
    with DefaultScope.overwrite_default_scope('foreign_lib'):
        model = foreign.build(
            dict(
                type='mmpretrain.LinearVisionTransformer',
                **TINY_ARGS,
                attn_cfg=[dict(type='GatedLinearAttention'), SOFTMAX],
            )
        )
    assert [type(layer.attn).__name__ for layer in model.layers] == [
        'GatedLinearAttention',
        'SoftmaxAttention',
    ]
