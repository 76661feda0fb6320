"""MHLAttention keeps its mixing matrix in [0, 1] by itself, in a real
(tiny) mmengine Runner; the old clamp hook only warns."""

import pytest
import torch
import torch.nn as nn
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from tiny_runs import iter_runner

import mmlvit  # noqa: F401
from mmlvit.models.attentions import MHLAttention, SoftmaxAttention

C, GRID = 8, (2, 2)


class ToyDistiller(BaseModel):
    """A student with an MHLA block nested inside, a softmax teacher and a
    parameter outside any MHLA module. The loss pushes the mixing matrix's
    diagonal up and the rest down, so SGD with lr 1 leaves [0, 1] at every
    step, and pushes ``outside`` above 1. Records the range of W each
    forward used."""

    def __init__(self):
        super().__init__()
        self.student = nn.ModuleDict(
            dict(layers=nn.ModuleList([MHLAttention(C, 2)]))
        )
        self.teacher = SoftmaxAttention(C, 2)
        self.outside = nn.Parameter(torch.full((4, 4), 0.5))
        self.register_buffer('direction', 2 * torch.eye(4) - 1)
        self.used = []

    def forward(self, inputs, mode='loss'):
        attn = self.student['layers'][0]
        out = attn(inputs, GRID)
        self.used.append((attn.mixing.min().item(), attn.mixing.max().item()))
        push = ((attn.mixing + self.outside) * self.direction).sum()
        return dict(loss=1e-3 * out.pow(2).mean() - push)


class ToyDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        seeded = torch.Generator().manual_seed(index)
        return dict(inputs=torch.randn(GRID[0] * GRID[1], C, generator=seeded))


class MixingProbe(Hook):
    """Records the MHLA mixing range after each optimiser step."""

    def __init__(self):
        self.ranges = []

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        mixing = runner.model.student['layers'][0].mixing
        self.ranges.append((mixing.min().item(), mixing.max().item()))


def train(tmp_path, hooks=()):
    probe = MixingProbe()
    model = ToyDistiller()
    runner = iter_runner(
        model,
        tmp_path,
        ToyDataset(),
        batch_size=2,
        collate='default_collate',
        iters=3,
        optimizer=dict(type='SGD', lr=1.0),
        experiment_name=f'mhla_clamp_{len(hooks)}',
        custom_hooks=[probe, *hooks],
    )
    runner.train()
    return model, probe.ranges


def test_every_forward_uses_mixing_in_the_unit_interval(tmp_path):
    model, after_steps = train(tmp_path)
    assert len(after_steps) == len(model.used) == 3
    for low, high in after_steps:
        assert low < 0 and high > 1  # each SGD step leaves [0, 1] ...
    assert model.used[0] == (0, pytest.approx(0.6306, abs=1e-4))  # init
    for low, high in model.used[1:]:
        assert low == 0 and high == 1  # ... and the next forward clamps
    # Only MHLA mixing matrices are touched.
    assert (model.outside.diagonal() > 3).all()
    off_diagonal = ~torch.eye(4, dtype=torch.bool)
    assert (model.outside[off_diagonal] < -2).all()


def test_inference_and_attention_map_clamp_too():
    attn = MHLAttention(C, 2).eval()
    x = torch.randn(1, 4, C)
    with torch.no_grad():
        attn.mixing.fill_(2.0)
    with torch.inference_mode():
        attn(x, GRID)
    assert (attn.mixing == 1).all()
    with torch.no_grad():
        attn.mixing.fill_(-1.0)
    attn.attention_map(x, GRID)
    assert (attn.mixing == 0).all()


def test_the_old_clamp_hook_still_runs_and_says_to_remove_it(tmp_path, capsys):
    model, _ = train(tmp_path, hooks=[dict(type='MHLAMixingClampHook')])
    assert all(low == 0 and high == 1 for low, high in model.used[1:])
    out = capsys.readouterr().out
    assert (
        'WARNING - MHLAMixingClampHook does nothing: MHLAttention keeps its '
        "mixing matrix in [0, 1] by itself. Remove dict(type='MHLAMixing"
        "ClampHook') from custom_hooks." in out
    )
