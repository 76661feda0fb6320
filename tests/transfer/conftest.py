"""Tiny classifiers and softmax checkpoints for the transfer tests."""

import collections

import pytest
import torch
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from tiny_vit import backbone_cfg, classifier_cfg

import mmlvit  # noqa: F401
from mmlvit.transfer import apply_init

Init = collections.namedtuple('Init', 'ckpt fresh student report')


@pytest.fixture
def build_classifier():
    """build(backbone_cfg, seed) -> ImageClassifier after init_weights()."""
    init_default_scope('mmpretrain')

    def build(backbone, seed=0):
        torch.manual_seed(seed)
        model = MODELS.build(classifier_cfg(backbone))
        model.init_weights()
        return model

    return build


@pytest.fixture
def softmax_state(build_classifier):
    """state(**backbone kwargs): a softmax classifier's state dict whose
    every entry differs from any fresh init (LayerNorm ones included)."""

    def state(**kwargs):
        model = build_classifier(backbone_cfg(**kwargs), seed=123)
        gen = torch.Generator().manual_seed(7)
        return {
            k: v + 0.5 + torch.rand(v.shape, generator=gen)
            for k, v in model.state_dict().items()
        }

    return state


@pytest.fixture
def init_copy(build_classifier, softmax_state):
    """init_copy(backbone, *args, **kwargs) -> Init: a ``softmax_state()``
    checkpoint put by ``apply_init(student, ckpt, *args, **kwargs)`` into
    a tiny classifier of ``backbone``; ``fresh``: the parameters the same
    classifier has before (same seed); ``report``: apply_init's report."""

    def init(backbone, *args, **kwargs):
        ckpt = softmax_state()
        fresh = dict(build_classifier(backbone).named_parameters())
        student = build_classifier(backbone)
        report = apply_init(student, ckpt, *args, **kwargs)
        return Init(ckpt, fresh, student, report)

    return init


@pytest.fixture(autouse=True)
def single_thread(one_thread):
    """Small SVDs/eigh run 30-100x slower with 2 threads on this shared
    2-core machine than with one."""
