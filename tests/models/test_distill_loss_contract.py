"""The contract every registered distillation loss keeps: built from a
config with ``loss_weight``, recorded through what it declares
(``records``), finite with detached log entries, zero when the student is
the teacher (where the loss declares so), gradients into the student alone,
linear in ``loss_weight``, and usable by the distiller.

The losses come from the registry (``registered_distill_losses``), so a
loss registered anywhere before collection (a plugin, another package) is
checked without editing this file; see ``test_loss_registration.py``.
"""

import copy
import math

import pytest
import torch
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample
from tiny_vit import TINY_ARCH, backbone_cfg, build_distiller, classifier_cfg

import mmlvit  # noqa: F401
from mmlvit.models.distillers import AttentionRecording
from mmlvit.models.losses import registered_distill_losses

LOSSES = list(registered_distill_losses())


def classifier(attn=None, seed=0):
    """A tiny classifier: mmpretrain's softmax ViT, or a linear one."""
    torch.manual_seed(seed)
    model = MODELS.build(classifier_cfg(backbone_cfg(attn)))
    model.init_weights()
    # mmpretrain zero-initialises the head: give the logits a spread.
    torch.nn.init.normal_(model.head.layers.head.weight, std=0.5)
    return model


@pytest.fixture(scope='module')
def teacher():
    return classifier(seed=0).eval().requires_grad_(False)


@pytest.fixture(scope='module')
def student():
    return classifier('ReLULinearAttention', seed=1)


@pytest.fixture(scope='module')
def images():
    return torch.randn(
        2, 1, 32, 32, generator=torch.Generator().manual_seed(2)
    )


def build(name, loss_weight=1.0):
    return MODELS.build(dict(type=name, loss_weight=loss_weight))


def recordings(loss, student, teacher, images):
    """Both models recorded through the loss's declared ``records``."""
    blocks = loss.block_indices(TINY_ARCH['num_layers'])
    with (
        torch.no_grad(),
        AttentionRecording(teacher, blocks, loss.records, 'teacher') as t,
    ):
        teacher(images, mode='tensor')
    with AttentionRecording(student, blocks, loss.records, 'student') as s:
        student(images, mode='tensor')
    return s, t


@pytest.mark.parametrize('name', LOSSES)
def test_finite_with_detached_logs(name, student, teacher, images):
    loss = build(name)
    value, logs = loss(*recordings(loss, student, teacher, images))
    assert value.shape == () and math.isfinite(value.item()), name
    assert value.item() > 0
    for key, entry in logs.items():
        assert 'loss' not in key, key  # parse_losses would add it again
        assert not entry.requires_grad, key
        assert torch.isfinite(entry).all(), key


@pytest.mark.parametrize('name', LOSSES)
def test_zero_when_the_student_is_the_teacher(name, teacher, images):
    loss = build(name)
    if not loss.zero_for_identical_models:
        pytest.skip(f'{name} is not a distance between the two models')
    twin = copy.deepcopy(teacher).requires_grad_(True)
    value, _ = loss(*recordings(loss, twin, teacher, images))
    assert value.item() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize('name', LOSSES)
def test_gradients_reach_the_student_alone(name, student, teacher, images):
    loss = build(name)
    student.zero_grad()
    value, _ = loss(*recordings(loss, student, teacher, images))
    value.backward()
    grads = [p.grad for p in student.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
    assert all(p.grad is None for p in teacher.parameters())


@pytest.mark.parametrize('name', LOSSES)
def test_loss_weight_scales_it(name, student, teacher, images):
    one, three = build(name, 1.0), build(name, 3.0)
    torch.manual_seed(0)  # losses that sample (e.g. query rows) alike
    with torch.no_grad():
        s, t = recordings(one, student, teacher, images)
        torch.manual_seed(3)
        value_one, logs_one = one(s, t)
        torch.manual_seed(3)
        value_three, logs_three = three(s, t)
    assert value_three.item() == pytest.approx(3 * value_one.item(), rel=1e-5)
    assert logs_one.keys() == logs_three.keys()


@pytest.mark.parametrize('name', LOSSES)
def test_the_distiller_records_what_it_declares(
    name, teacher, images, tmp_path
):
    path = tmp_path / 'teacher.pth'
    torch.save(dict(state_dict=teacher.state_dict()), path)
    distiller = build_distiller(
        path,
        classifier_cfg(backbone_cfg('ReLULinearAttention')),
        classifier_cfg(backbone_cfg()),
        distill_losses=[dict(type=name, loss_weight=1.0)],
    )
    assert set(build(name).records) <= set(distiller.records)
    samples = [DataSample().set_gt_label(i) for i in range(2)]
    losses = distiller.loss(images, samples)
    assert math.isfinite(losses['loss_distill'].item())


def test_a_record_without_a_probe_is_refused(teacher):
    with pytest.raises(KeyError, match="Nothing records 'gates'.*Probe"):
        AttentionRecording(teacher, [0], ('outputs', 'gates'))
