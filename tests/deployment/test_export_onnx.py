"""ONNX export of every mmlvit attention operator, checked in
onnxruntime, with a dynamic batch size; a clear error for an operator that
cannot be traced (the export tool on the shipped checkpoint:
test_inferencer.py)."""

import onnx
import pytest
import torch
from mmpretrain.registry import MODELS
from tiny_vit import backbone_cfg, classifier_cfg

from mmlvit.deployment import (
    DeployableClassifier,
    OperatorExportError,
    compare_with_onnxruntime,
    export_onnx,
)
from mmlvit.models.attentions import BaseAttention, registered_operators

# Every operator mmlvit ships (not test-only ones registered by plugins).
OPERATORS = [
    name
    for name, cls in registered_operators().items()
    if cls.__module__.startswith('mmlvit.')
]


def tiny_classifier(attn_cfg, img_size=32, seed=0, **backbone_options):
    """A 1-channel ViT with 4 px patches (an 8 x 8 grid), width 16, one
    layer per entry of ``attn_cfg``, weights drawn large enough that the
    scores are far from uniform; ``backbone_options`` go to the backbone."""
    arch = dict(
        embed_dims=16,
        num_layers=len(attn_cfg),
        num_heads=2,
        feedforward_channels=32,
    )
    backbone = backbone_cfg(
        arch=arch,
        img_size=img_size,
        patch_size=4,
        type='LinearVisionTransformer',
        attn_cfg=attn_cfg,
        with_cls_token=False,
        **backbone_options,
    )
    preprocessor = dict(mean=[72.9], std=[90.0])
    torch.manual_seed(seed)
    model = MODELS.build(
        classifier_cfg(backbone, data_preprocessor=preprocessor)
    )
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() >= 2 and 'mixing' not in name:
                param.normal_(0, 2 / param.shape[-1] ** 0.5)
    return model.eval()


def test_every_operator_matches_pytorch_with_a_dynamic_batch(tmp_path):
    """One model with one layer of each operator (the GLA layer spans four
    of its 16-token chunks), exported with batch 2 and run with batch 3:
    scores within 1e-4 of PyTorch's default paths."""
    model = tiny_classifier([dict(type=name) for name in OPERATORS])
    deployable = DeployableClassifier(model)
    path = export_onnx(deployable, str(tmp_path / 'all.onnx'), (1, 32, 32))
    batch = onnx.load(path).graph.input[0].type.tensor_type.shape.dim[0]
    assert batch.dim_param and not batch.dim_value  # symbolic
    images = torch.rand(3, 1, 32, 32) * 255
    with torch.no_grad():
        scores = deployable(images)
    assert scores.max() > 0.5  # far from uniform: differences show
    assert compare_with_onnxruntime(deployable, path, images) < 1e-4


@pytest.mark.parametrize(
    'rope_cfg',
    [dict(type='eva02', ref_feat_shape=(16, 16)), dict(type='dinov3')],
)
def test_rotary_positions_export_with_every_operator_that_takes_them(
    rope_cfg, tmp_path
):
    """EVA-02's and DINOv3's rotary positions (converted families) in one
    layer of each operator that supports them: scores within 1e-4 of
    PyTorch's, which the rotation changes."""
    names = [n for n in OPERATORS if registered_operators()[n].supports_rope]
    assert len(names) >= 5
    model = tiny_classifier(
        [dict(type=name) for name in names], rope_cfg=rope_cfg
    )
    deployable = DeployableClassifier(model)
    path = export_onnx(deployable, str(tmp_path / 'rope.onnx'), (1, 32, 32))
    images = torch.rand(3, 1, 32, 32) * 255
    assert compare_with_onnxruntime(deployable, path, images) < 1e-4
    unrotated = DeployableClassifier(
        tiny_classifier([dict(type=name) for name in names])
    )
    with torch.no_grad():
        change = (deployable(images) - unrotated(images)).abs().max()
    assert change > 1e-2


def test_operators_under_test_are_the_shipped_ones():
    assert set(OPERATORS) >= {
        'ELULinearAttention',
        'ReLULinearAttention',
        'InLineAttention',
        'GatedLinearAttention',
        'MHLAttention',
        'TTTAttention',
        'SoftmaxAttention',
    }


class ValueBranchAttention(BaseAttention):
    """A test-only operator whose forward branches on tensor values (not
    registered, so no other test sees it)."""

    short_name = 'valuebranch'

    def mix_tokens(self, x, hw_shape):
        q, k, v = self.split_heads(self.qkv(x))
        if (v > 0).float().mean() > 0.5:
            v = -v
        return self.output(self.merge_heads(v))


def test_untraceable_operator_is_named_with_the_reason(tmp_path):
    model = tiny_classifier(
        [dict(type='ELULinearAttention'), dict(type=ValueBranchAttention)]
    )
    with pytest.raises(OperatorExportError) as info:
        export_onnx(
            DeployableClassifier(model), str(tmp_path / 'x.onnx'), (1, 32, 32)
        )
    assert list(info.value.failures) == ['ValueBranchAttention']
    message = str(info.value)
    assert 'ValueBranchAttention' in message
    assert 'data-dependent' in message.lower()
    assert 'test_export_onnx.py' in message  # the line that branches
