"""LogitKD against an explicit float64 formula."""

import math

import pytest
import torch
from mmpretrain.registry import MODELS
from test_distill_losses import recording

import mmlvit.models  # noqa: F401


def test_logit_kd_is_scaled_kl_of_softened_distributions():
    gen = torch.Generator().manual_seed(0)
    s = torch.randn(3, 4, generator=gen, requires_grad=True)
    t = torch.randn(3, 4, generator=gen)
    loss = MODELS.build(dict(type='LogitKD', loss_weight=0.5, temperature=2.0))
    value, logs = loss(recording(logits=s), recording(logits=t))
    kl = 0.0
    for row_s, row_t in zip(s.tolist(), t.tolist()):
        zs = sum(math.exp(v / 2) for v in row_s)
        zt = sum(math.exp(v / 2) for v in row_t)
        for vs, vt in zip(row_s, row_t):
            p, q = math.exp(vt / 2) / zt, math.exp(vs / 2) / zs
            kl += p * math.log(p / q)
    kl /= 3
    assert logs['logit_kl'].item() == pytest.approx(kl, rel=1e-5)
    assert value.item() == pytest.approx(0.5 * 4 * kl, rel=1e-5)
    value.backward()
    assert s.grad.abs().sum() > 0
    # Equal logits: no divergence.
    same, _ = loss(recording(logits=t), recording(logits=t))
    assert same.item() == pytest.approx(0, abs=1e-7)


def test_logit_kd_errors():
    with pytest.raises(ValueError, match='temperature must be > 0'):
        MODELS.build(dict(type='LogitKD', temperature=0.0))
    loss = MODELS.build(dict(type='LogitKD'))
    with pytest.raises(ValueError, match='same classes'):
        loss(
            recording(logits=torch.zeros(2, 10)),
            recording(logits=torch.zeros(2, 1000)),
        )
