"""FinalFeatureAlignment: against explicit formulas, what the ``features``
probe records (each head's input), and a tiny distillation through an
mmengine Runner that brings a TTT student's pooled features to a softmax
teacher's class token."""

import math
import types

import pytest
import torch
from mmengine.hooks import Hook
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample
from tiny_runs import iter_runner
from tiny_vit import backbone_cfg, classifier_cfg, save_classifier

import mmlvit  # noqa: F401
from mmlvit.models.distillers import AttentionRecording

TEACHER = classifier_cfg(backbone_cfg())
# TTT mixes patch tokens only: the backbone pools them for the head.
STUDENT = classifier_cfg(backbone_cfg('TTTAttention'))


def features(value):
    return types.SimpleNamespace(features=value)


def build(**kwargs):
    return MODELS.build(dict(type='FinalFeatureAlignment', **kwargs))


def test_mse_and_cosine_against_the_formulas():
    gen = torch.Generator().manual_seed(0)
    s = torch.randn(3, 4, generator=gen, requires_grad=True)
    t = torch.randn(3, 4, generator=gen)
    value, logs = build(loss_weight=2.0)(features(s), features(t))
    mse = sum((a - b) ** 2 for a, b in zip(s.flatten(), t.flatten())) / 12
    assert logs['feature_mse'].item() == pytest.approx(mse.item(), rel=1e-6)
    assert value.item() == pytest.approx(2 * mse.item(), rel=1e-6)

    value, logs = build(loss_weight=3.0, distance='cosine')(
        features(s), features(t)
    )
    distances = []
    for a, b in zip(s.tolist(), t.tolist()):
        dot = sum(x * y for x, y in zip(a, b))
        norms = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
        distances.append(1 - dot / norms)
    expected = sum(distances) / 3
    assert logs['feature_cosine_distance'].item() == pytest.approx(
        expected, rel=1e-5
    )
    assert value.item() == pytest.approx(3 * expected, rel=1e-5)
    value.backward()
    assert s.grad.abs().sum() > 0
    # Cosine ignores scale; MSE does not.
    scaled = features(5 * t)
    assert build(distance='cosine')(scaled, features(t))[0].item() == (
        pytest.approx(0, abs=1e-6)
    )
    assert build()(scaled, features(t))[0].item() > 1


def test_errors():
    with pytest.raises(ValueError, match="distance must be one of.*'l1'"):
        build(distance='l1')
    with pytest.raises(ValueError, match=r'\(2, 8\).*\(2, 4\).*same size'):
        build()(features(torch.zeros(2, 8)), features(torch.zeros(2, 4)))


# The backbone returns every block's class token; the head reads the last.
TWO_STAGES = classifier_cfg(backbone_cfg(out_indices=[0, 1]))


@pytest.mark.parametrize(
    'cfg', [TEACHER, STUDENT, TWO_STAGES], ids=['cls', 'pooled', 'two-stages']
)
def test_the_probe_records_what_the_head_classifies(cfg):
    torch.manual_seed(0)
    model = MODELS.build(cfg).eval()
    images = torch.randn(2, 1, 32, 32)
    with torch.no_grad(), AttentionRecording(model, [], ('features',)) as rec:
        logits = model(images, mode='tensor')
        expected = model.extract_feat(images)[-1]
    assert rec.features.shape == (2, 32)
    torch.testing.assert_close(rec.features, expected)
    torch.testing.assert_close(model.head.layers.head(rec.features), logits)


class FixedBatch(torch.utils.data.Dataset):
    """The same four labelled images every epoch."""

    def __len__(self):
        return 4

    def __getitem__(self, index):
        gen = torch.Generator().manual_seed(index)
        return dict(
            inputs=torch.randn(1, 32, 32, generator=gen),
            data_samples=DataSample().set_gt_label(index),
        )


class LoggedValues(Hook):
    """Every iteration's logged training values."""

    def __init__(self):
        self.steps = []

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        self.steps.append(
            {k: float(torch.as_tensor(v).detach()) for k, v in outputs.items()}
        )


@pytest.mark.parametrize('distance', ['mse', 'cosine'])
def test_distillation_aligns_the_features(distance, tmp_path):
    checkpoint = save_classifier(TEACHER, tmp_path / 'teacher.pth')
    logged = LoggedValues()
    runner = iter_runner(
        dict(
            type='AttentionDistiller',
            student=STUDENT,
            teacher=TEACHER,
            teacher_checkpoint=str(checkpoint),
            distill_losses=[
                dict(
                    type='FinalFeatureAlignment',
                    loss_weight=10.0,
                    distance=distance,
                )
            ],
            data_preprocessor=dict(
                type='ClsDataPreprocessor', num_classes=10, mean=[0], std=[1]
            ),
        ),
        tmp_path,
        FixedBatch(),
        batch_size=4,
        collate='pseudo_collate',
        iters=6,
        optimizer=dict(type='AdamW', lr=3e-3),
        experiment_name=f'feature_alignment_{distance}',
        custom_hooks=[logged],
        randomness=dict(seed=1),
    )
    runner.train()
    name = 'feature_mse' if distance == 'mse' else 'feature_cosine_distance'
    values = [step[name] for step in logged.steps]
    assert len(values) == 6 and all(map(math.isfinite, values))
    for step in logged.steps:
        assert step['loss_distill'] == pytest.approx(10 * step[name], rel=1e-4)
    assert all(a > b for a, b in zip(values, values[1:])), values
    assert values[-1] < 0.5 * values[0], values
    history = runner.message_hub.get_scalar(f'train/{name}').data[0]
    assert list(history) == pytest.approx(values)
