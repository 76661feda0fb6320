"""ConversionStagesHook in a real (tiny) mmengine Runner: the loss weights,
the task loss and the trainable student parameters switch at the stage
boundary, a run resumed after stage 1 is in stage 2, and bad stage lists stop
the run with an error saying what to fix."""

import json
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner

DISTILL = 'tests/data/configs/tiny_gla_distill_fmnist.py'
# Stage 1 trains the attention modules on attention distillation alone;
# stage 2 freezes them and trains the rest on the task and logit KD.
STAGES = [
    dict(
        epochs=1,
        task_loss=False,
        losses=dict(AttentionOutputMSE=50.0),
        trainable=['attn'],
    ),
    dict(
        epochs=1,
        losses=dict(AttentionOutputMSE=0.0, LogitKD=1.0),
        frozen=['attn'],
    ),
]
ATTN = 'backbone.layers.0.attn.'
FFN = 'backbone.layers.0.ffn.'


class StageProbe(Hook):
    """Records, at each training iteration (after the stages hook), the
    distiller's loss weights and task scale, and the student parameters
    that require grad; after each iteration, the student's weights."""

    priority = 'LOW'

    def __init__(self):
        self.seen = []
        self.weights = []

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        model = runner.model
        self.seen.append(
            dict(
                iter=runner.iter,
                losses={
                    type(loss).__name__: loss.loss_weight
                    for loss in model.distill_losses
                },
                task=model.task_scale,
                trained={
                    name
                    for name, p in model.student.named_parameters()
                    if p.requires_grad
                },
            )
        )

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        self.weights.append(
            {
                k: v.detach().clone()
                for k, v in runner.model.student.named_parameters()
            }
        )


def staged_config(repo_root, data_root, teacher, work_dir, stages, **extra):
    """Two epochs of 2 iterations (64 images, batch 32), no validation."""
    cfg = Config.fromfile(osp.join(repo_root, DISTILL))
    cfg.work_dir = str(work_dir)
    cfg.model.teacher_checkpoint = teacher
    cfg.model.distill_losses = [
        dict(type='AttentionOutputMSE', loss_weight=50.0),
        dict(type='LogitKD', loss_weight=0.0),
    ]
    cfg.train_dataloader.dataset.update(data_root=data_root, indices=64)
    cfg.train_cfg = dict(by_epoch=True, max_epochs=2, val_interval=100)
    cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = None
    cfg.custom_hooks = [dict(type='ConversionStagesHook', stages=stages)]
    cfg.merge_from_dict(extra)
    return cfg


def train(cfg):
    runner = Runner.from_cfg(cfg)
    probe = StageProbe()
    runner.register_hook(probe)
    runner.train()
    return probe


@pytest.fixture(scope='module')
def setup(repo_root, fashion_mnist_root, tiny_teacher_checkpoint):
    def make(work_dir, stages=STAGES, **extra):
        return staged_config(
            repo_root,
            fashion_mnist_root,
            tiny_teacher_checkpoint,
            work_dir,
            stages,
            **extra,
        )

    return make


@pytest.fixture(scope='module')
def staged(setup, tmp_path_factory):
    work_dir = tmp_path_factory.mktemp('staged')
    return work_dir, train(setup(work_dir))


def changed(before, after, prefix):
    return [
        k
        for k in before
        if k.startswith(prefix) and bool(before[k].ne(after[k]).any())
    ]


def test_stage_switches_at_the_epoch_boundary(staged):
    work_dir, probe = staged
    assert [s['iter'] for s in probe.seen] == [0, 1, 2, 3]
    first, second = probe.seen[1], probe.seen[2]
    assert first['losses'] == dict(AttentionOutputMSE=50.0, LogitKD=0.0)
    assert first['task'] == 0.0
    assert first['trained'] and all('.attn.' in n for n in first['trained'])
    assert second['losses'] == dict(AttentionOutputMSE=0.0, LogitKD=1.0)
    assert second['task'] == 1.0
    assert second['trained'] and not any(
        '.attn.' in n for n in second['trained']
    )
    # Frozen parameters do not move; trained ones do (AdamW keeps every
    # parameter, and skips those without a gradient).
    w = probe.weights
    assert changed(w[0], w[1], ATTN) and not changed(w[0], w[1], FFN)
    assert changed(w[2], w[3], FFN) and not changed(w[2], w[3], ATTN)
    steps = [
        json.loads(line)
        for line in next(work_dir.glob('*/vis_data/scalars.json'))
        .read_text()
        .splitlines()
    ]
    assert [s['loss_task'] == 0 for s in steps] == [True, True, False, False]
    (log,) = work_dir.glob('*/*.log')
    text = log.read_text()
    assert text.count('stage 1/2: epochs 1-1, task loss x0,') == 1
    assert text.count('stage 2/2: epochs 2-2, task loss x1,') == 1
    assert 'AttentionOutputMSE=0, LogitKD=1' in text


def test_resume_after_stage_one_is_in_stage_two(setup, staged, tmp_path):
    work_dir, probe = staged
    ckpt = work_dir / 'epoch_1.pth'
    resumed = train(setup(tmp_path, resume=True, load_from=str(ckpt)))
    assert [s['iter'] for s in resumed.seen] == [2, 3]
    for before, after in zip(probe.seen[2:], resumed.seen):
        assert after == before
    # The resumed steps are those of the uninterrupted run: the frozen
    # attention stays put and the optimizer state carried over.
    for key, value in probe.weights[-1].items():
        torch.testing.assert_close(resumed.weights[-1][key], value, msg=key)
    (log,) = tmp_path.glob('*/*.log')
    assert 'stage 1/2' not in log.read_text()
    assert log.read_text().count('stage 2/2: epochs 2-2,') == 1


def test_stages_in_iterations_switch_at_that_iteration(setup, tmp_path):
    stages = [dict(iters=1, trainable=['ffn']), dict(iters=3)]
    probe = train(setup(tmp_path, stages=stages))
    trained = [s['trained'] for s in probe.seen]
    assert all('.ffn.' in n for n in trained[0])
    assert trained[1] == trained[2] == trained[3] > trained[0]


@pytest.mark.parametrize(
    'stages, error',
    [
        (
            [dict(epochs=2, losses=dict(AttentionMapMSE=1.0))],
            'stage 1 sets the weight of AttentionMapMSE, which is not in '
            'model.distill_losses (AttentionOutputMSE, LogitKD). A stage '
            "only changes weights: add dict(type='AttentionMapMSE', "
            'loss_weight=0.0) to model.distill_losses.',
        ),
        (
            [dict(epochs=1), dict(epochs=2)],
            'the stages last 3 epochs but train_cfg.max_epochs is 2: make '
            'them add up.',
        ),
        (
            [dict(epochs=2, trainable=['atn'])],
            "stage 1: 'atn' matches no trainable student parameter name.",
        ),
        (
            [dict(epochs=2, trainable=['attn'], frozen=['backbone'])],
            'stage 1 trains no student parameter.',
        ),
        (
            [
                dict(
                    epochs=2,
                    task_loss=False,
                    losses=dict(AttentionOutputMSE=0),
                )
            ],
            'stage 1 has every loss weighted 0.',
        ),
    ],
)
def test_stages_that_do_not_fit_the_run_are_refused(
    setup, tmp_path, stages, error
):
    runner = Runner.from_cfg(setup(tmp_path, stages=stages))
    with pytest.raises(ValueError) as err:
        runner.train()
    assert str(err.value) == f'ConversionStagesHook: {error}'


@pytest.mark.parametrize(
    'stages, error',
    [
        ([], 'ConversionStagesHook needs at least one stage.'),
        (
            [dict(epochs=1), dict(iters=4)],
            'ConversionStagesHook: give every stage its length in the same '
            'unit (all epochs= or all iters=).',
        ),
        (
            [dict(epochs=1, loss=dict(LogitKD=1.0))],
            "ConversionStagesHook: stage 1 has unknown keys ['loss']; a "
            "stage takes ['epochs', 'frozen', 'iters', 'losses', "
            "'task_loss', 'trainable'].",
        ),
    ],
)
def test_malformed_stage_lists_are_refused(stages, error):
    from mmlvit.engine.hooks import ConversionStagesHook

    with pytest.raises(ValueError) as err:
        ConversionStagesHook(stages)
    assert str(err.value) == error
