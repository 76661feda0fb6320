"""MHLAMixingClampHook in a real (tiny) mmengine Runner."""

import torch
import torch.nn as nn
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.runner import Runner
from mmpretrain.registry import HOOKS

from mmlvit.engine.hooks import MHLAMixingClampHook
from mmlvit.models.attentions import MHLAttention, SoftmaxAttention

C, GRID = 8, (2, 2)


class ToyDistiller(BaseModel):
    """A student with an MHLA block nested inside, a softmax teacher and a
    parameter outside any MHLA module. The loss pushes the mixing matrix's
    diagonal up and the rest down, so SGD with lr 1 leaves [0, 1] at every
    step, and pushes ``outside`` above 1."""

    def __init__(self):
        super().__init__()
        self.student = nn.ModuleDict(
            dict(layers=nn.ModuleList([MHLAttention(C, 2)]))
        )
        self.teacher = SoftmaxAttention(C, 2)
        self.outside = nn.Parameter(torch.full((4, 4), 0.5))
        self.register_buffer('direction', 2 * torch.eye(4) - 1)

    def forward(self, inputs, mode='loss'):
        attn = self.student['layers'][0]
        out = attn(inputs, GRID)
        push = ((attn.mixing + self.outside) * self.direction).sum()
        return dict(loss=1e-3 * out.pow(2).mean() - push)


class ToyDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        seeded = torch.Generator().manual_seed(index)
        return dict(inputs=torch.randn(GRID[0] * GRID[1], C, generator=seeded))


class MixingProbe(Hook):
    """Records the MHLA mixing range at after_train_iter."""

    def __init__(self, priority):
        self.priority = priority
        self.ranges = []

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        mixing = runner.model.student['layers'][0].mixing
        self.ranges.append((mixing.min().item(), mixing.max().item()))


def train(tmp_path, clamp):
    before = MixingProbe('HIGH')  # runs before the clamp hook
    after = MixingProbe('LOW')  # and this one after it
    hooks = [before, after] + (
        [dict(type='MHLAMixingClampHook')] if clamp else []
    )
    model = ToyDistiller()
    runner = Runner(
        model=model,
        work_dir=str(tmp_path),
        experiment_name=f'mhla_clamp_{clamp}',
        train_dataloader=dict(
            dataset=ToyDataset(),
            sampler=dict(type='DefaultSampler', shuffle=False),
            batch_size=2,
            collate_fn=dict(type='default_collate'),
        ),
        train_cfg=dict(by_epoch=False, max_iters=3),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=1.0)),
        default_hooks=dict(checkpoint=None),
        custom_hooks=hooks,
        default_scope='mmpretrain',
    )
    runner.train()
    return model, before.ranges, after.ranges


def test_hook_is_registered():
    hook = HOOKS.build(dict(type='MHLAMixingClampHook'))
    assert isinstance(hook, MHLAMixingClampHook)
    assert hook.priority == 'ABOVE_NORMAL'


def test_clamps_after_every_optimiser_step(tmp_path):
    model, before, after = train(tmp_path, clamp=True)
    assert len(before) == len(after) == 3
    for (low, high), (clamped_low, clamped_high) in zip(before, after):
        assert low < 0 and high > 1  # each step left [0, 1] ...
        assert clamped_low == 0 and clamped_high == 1  # ... and was clamped
    mixing = model.student['layers'][0].mixing
    assert ((mixing >= 0) & (mixing <= 1)).all()
    # Only MHLA mixing matrices are touched.
    assert (model.outside.diagonal() > 3).all()
    off_diagonal = ~torch.eye(4, dtype=torch.bool)
    assert (model.outside[off_diagonal] < -2).all()


def test_without_the_hook_mixing_leaves_the_unit_interval(tmp_path):
    model, before, after = train(tmp_path, clamp=False)
    assert before == after
    low, high = after[-1]
    assert low < -2 and high > 3
