"""SkipNonFiniteOptimWrapper: a batch with a NaN pixel or a step with
non-finite gradients leaves the weights and the optimizer state as they
were, warns with the iteration, and too many in a row stop training; on
finite steps it matches mmengine's OptimWrapper bit for bit."""

import copy
import json
import logging
import math
import os
import os.path as osp
import subprocess
import uuid
from contextlib import contextmanager

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import MMLogger
from mmengine.optim import OptimWrapper
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmpretrain.registry import MODELS, OPTIM_WRAPPERS
from mmpretrain.structures import DataSample
from tool_runs import free_port

from mmlvit.engine.optimizers.mixed_precision import amp_type

TINY = 'tests/data/configs/tiny_softmax_fmnist.py'
DISTILL = 'tests/data/configs/tiny_gla_distill_fmnist.py'


class Records(logging.Handler):
    """Keeps the text of every warning logged while it is attached."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.texts = []

    def emit(self, record):
        self.texts.append(record.getMessage())


@contextmanager
def warnings_logged():
    records = Records()
    logger = MMLogger.get_current_instance()
    logger.addHandler(records)
    try:
        yield records.texts
    finally:
        logger.removeHandler(records)


def snapshot(runner):
    model = runner.model
    return (
        {k: v.detach().clone() for k, v in model.state_dict().items()},
        copy.deepcopy(runner.optim_wrapper.optimizer.state_dict()['state']),
    )


def same(a, b):
    """Nested dicts/lists of tensors (and numbers) are bitwise equal."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


class BadBatches(Hook):
    """Puts a NaN pixel into the batches of ``nan_iters`` and makes one
    gradient infinite in ``inf_grad_iters`` (1-based iterations); records
    for every iteration whether the weights / optimizer state changed."""

    def __init__(self, nan_iters=(), inf_grad_iters=()):
        self.nan_iters, self.inf_grad_iters = nan_iters, inf_grad_iters
        self.weights_changed, self.state_changed = {}, {}
        self._handle = None

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        iteration = runner.iter + 1
        self._before = snapshot(runner)
        if iteration in self.nan_iters:
            inputs = [x.float() for x in data_batch['inputs']]
            inputs[3][0, 5, 5] = math.nan
            data_batch['inputs'] = inputs
        if iteration in self.inf_grad_iters:
            weight = runner.model.backbone.layers[0].attn.qkv.weight
            self._handle = weight.register_hook(
                lambda grad: torch.full_like(grad, math.inf)
            )

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        weights, state = snapshot(runner)
        iteration = runner.iter + 1
        self.weights_changed[iteration] = not same(self._before[0], weights)
        self.state_changed[iteration] = not same(self._before[1], state)
        self.last_weights = weights


def tiny_cfg(repo_root, data_root, work_dir, iters, **optim_wrapper):
    """The tiny softmax config: ``iters`` iterations of batch 32 over the
    first 32 * iters training images in order, constant lr, no hooks
    beyond the logger."""
    cfg = Config.fromfile(osp.join(repo_root, TINY))
    cfg.experiment_name = f'skip_nonfinite_{uuid.uuid4().hex[:8]}'
    cfg.work_dir = str(work_dir)
    loader = cfg.train_dataloader
    loader.dataset.data_root = data_root
    loader.dataset.indices = 32 * iters
    loader.sampler = dict(type='DefaultSampler', shuffle=False)
    cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = None
    cfg.test_dataloader = cfg.test_cfg = cfg.test_evaluator = None
    cfg.train_cfg = dict(by_epoch=True, max_epochs=1)
    cfg.param_scheduler = None
    cfg.default_hooks.checkpoint = None
    cfg.optim_wrapper.update(optim_wrapper)
    return cfg


def train(cfg, probe):
    runner = Runner.from_cfg(cfg)
    runner.register_hook(probe)
    with warnings_logged() as texts:
        runner.train()
    return texts


@pytest.fixture(scope='module')
def bad_run(repo_root, fashion_mnist_root, tmp_path_factory):
    """Five iterations: a NaN pixel in iteration 2, an infinite gradient
    (finite loss) in iteration 4."""
    init_default_scope('mmpretrain')
    probe = BadBatches(nan_iters={2}, inf_grad_iters={4})
    cfg = tiny_cfg(
        repo_root, fashion_mnist_root, tmp_path_factory.mktemp('bad'), 5
    )
    assert cfg.optim_wrapper.type == 'SkipNonFiniteOptimWrapper'
    texts = train(cfg, probe)
    return probe, texts


def test_nan_pixel_skips_the_update_and_training_goes_on(bad_run):
    probe, texts = bad_run
    assert probe.weights_changed == {
        1: True,
        2: False,
        3: True,
        4: False,
        5: True,
    }
    assert probe.state_changed[2] is False
    assert all(v.isfinite().all() for v in probe.last_weights.values())
    (nan_warning,) = [t for t in texts if 'Iteration 2' in t]
    assert nan_warning.startswith(
        'Iteration 2: the loss is nan (non-finite terms: loss=nan). Skipped '
        'the parameter update of iteration 2: weights and optimizer state '
        'are unchanged (1 skipped in a row; training stops after 10, '
        'optim_wrapper.max_consecutive_skips).'
    )


def test_infinite_gradient_with_finite_loss_skips_the_update(bad_run):
    probe, texts = bad_run
    assert probe.state_changed[4] is False
    (grad_warning,) = [t for t in texts if 'Iteration 4' in t]
    assert grad_warning.startswith(
        'Iteration 4: the loss is finite, but 1 of 32 gradient tensors are '
        'not. Skipped the parameter update of iteration 4'
    )
    assert '(1 skipped in a row;' in grad_warning  # iteration 3 reset it


def test_consecutive_bad_batches_stop_training(
    repo_root, fashion_mnist_root, tmp_path
):
    init_default_scope('mmpretrain')
    probe = BadBatches(nan_iters={2, 3, 4})
    cfg = tiny_cfg(
        repo_root, fashion_mnist_root, tmp_path, 4, max_consecutive_skips=3
    )
    with pytest.raises(FloatingPointError) as error:
        train(cfg, probe)
    assert str(error.value) == (
        '3 parameter updates in a row were skipped because the loss or the '
        'gradients were not finite (iterations 2-4; last: iteration 4: the '
        'loss is nan (non-finite terms: loss=nan)). Training is stopped: '
        'look for NaN/Inf values or corrupt samples in these batches and '
        'check the learning rate; to tolerate longer runs of bad batches, '
        'raise optim_wrapper.max_consecutive_skips (now 3).'
    )
    assert probe.weights_changed == {1: True, 2: False, 3: False}


def random_batch(seed, nan=False):
    """8 random 28 px images with labels, as a dataloader gives them."""
    g = torch.Generator().manual_seed(seed)
    inputs = torch.rand(8, 1, 28, 28, generator=g) * 255
    if nan:
        inputs[2, 0, 3, 3] = math.nan
    labels = torch.randint(0, 10, (8,), generator=g)
    return dict(
        inputs=inputs,
        data_samples=[DataSample().set_gt_label(int(i)) for i in labels],
    )


def build_model(repo_root):
    init_default_scope('mmpretrain')
    cfg = Config.fromfile(osp.join(repo_root, TINY))
    torch.manual_seed(0)
    return MODELS.build(cfg.model)


def wrapper(model, kind='SkipNonFiniteOptimWrapper', **kwargs):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return OPTIM_WRAPPERS.build(dict(type=kind, optimizer=optimizer, **kwargs))


@pytest.mark.parametrize('accumulate', [1, 2])
def test_finite_steps_match_optim_wrapper_exactly(repo_root, accumulate):
    """Clipping active (max_norm below the gradient norm), with and
    without gradient accumulation: bitwise the same weights and state."""
    model = build_model(repo_root)
    twin = copy.deepcopy(model)
    options = dict(
        clip_grad=dict(max_norm=0.05), accumulative_counts=accumulate
    )
    ours, plain = (
        wrapper(model, **options),
        wrapper(twin, 'OptimWrapper', **options),
    )
    assert type(plain) is OptimWrapper
    for w, m in ((ours, model), (plain, twin)):
        w.initialize_count_status(m, 0, 4)
    for step in range(4):
        model.train_step(random_batch(step), ours)
        twin.train_step(random_batch(step), plain)
    assert same(model.state_dict(), twin.state_dict())
    assert same(ours.state_dict(), plain.state_dict())
    assert ours.state_dict()['state']  # it did step


def test_nan_in_an_accumulation_window_skips_that_window(repo_root):
    model = build_model(repo_root)
    ours = wrapper(model, accumulative_counts=2)
    ours.initialize_count_status(model, 0, 6)
    with warnings_logged() as texts:
        for step in range(6):
            model.train_step(random_batch(step, nan=step == 2), ours)
            if step == 1:
                after_window_1 = copy.deepcopy(model.state_dict())
            if step == 3:
                after_window_2 = copy.deepcopy(model.state_dict())
    assert same(after_window_1, after_window_2)
    assert not same(after_window_2, model.state_dict())  # window 3 updates
    assert all(v.isfinite().all() for v in model.state_dict().values())
    (text,) = texts
    assert text.startswith(
        'Iteration 3: the loss is nan (non-finite terms: loss=nan). Skipped '
        'the parameter update of iterations 3-4:'
    )


def test_distiller_warning_names_the_bad_terms(repo_root, tmp_path):
    init_default_scope('mmpretrain')
    cfg = Config.fromfile(osp.join(repo_root, DISTILL))
    teacher = MODELS.build(cfg.model.teacher)
    path = tmp_path / 'teacher.pth'
    torch.save(dict(state_dict=teacher.state_dict()), path)
    cfg.model.teacher_checkpoint = str(path)
    model = MODELS.build(cfg.model)
    ours = wrapper(model)
    before = copy.deepcopy(model.state_dict())
    with warnings_logged() as texts:
        model.train_step(random_batch(0, nan=True), ours)
    assert same(before, model.state_dict())
    (text,) = [t for t in texts if 'Skipped' in t]
    assert text.startswith(
        'Iteration 1: the loss is nan (non-finite terms: loss_task=nan, '
        'attn_out_mse.0=nan, attn_out_mse.1=nan, loss_distill=nan).'
    )


def test_amp_variant_skips_a_nan_loss(repo_root):
    """The AMP form on CPU (bfloat16 autocast, no GradScaler): the loss
    check is there, and the gradients are checked too (on a GPU they are
    left to the GradScaler)."""
    model = build_model(repo_root)
    ours = wrapper(model, 'SkipNonFiniteAmpOptimWrapper', loss_scale='dynamic')
    assert ours.check_gradients is not ours.loss_scaler.is_enabled()
    before = copy.deepcopy(model.state_dict())
    with warnings_logged() as texts:
        model.train_step(random_batch(0, nan=True), ours)
    assert same(before, model.state_dict())
    assert texts[-1].startswith('Iteration 1: the loss is nan')
    model.train_step(random_batch(1), ours)
    assert not same(before, model.state_dict())


def test_guard_runs_under_compile(repo_root):
    """compile=True makes mmengine compile the model's train_step, the
    wrapper's update included: the update runs eagerly (dynamo cannot
    trace its host-side checks) and a NaN batch is still skipped with the
    named terms. backend='eager': dynamo's tracing without code
    generation. The tiny config's wrapper: parameter groups of its
    paramwise_cfg."""
    from mmengine.optim import build_optim_wrapper

    model = build_model(repo_root)
    cfg = Config.fromfile(osp.join(repo_root, TINY))
    ours = build_optim_wrapper(model, cfg.optim_wrapper)
    train_step = torch.compile(model.train_step, backend='eager')
    before = copy.deepcopy(model.state_dict())
    try:
        with warnings_logged() as texts:
            train_step(random_batch(0, nan=True), ours)
        assert same(before, model.state_dict())
        assert texts[-1].startswith(
            'Iteration 1: the loss is nan (non-finite terms: loss=nan)'
        )
        train_step(random_batch(1), ours)
        assert not same(before, model.state_dict())
    finally:
        torch._dynamo.reset()


def test_amp_flag_keeps_the_protection(repo_root):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        'mmlvit_train_tool', osp.join(repo_root, 'tools', 'train.py')
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    args = tool.parse_args([TINY, '--amp'])
    cfg = tool.merge_args(Config.fromfile(osp.join(repo_root, TINY)), args)
    assert cfg.optim_wrapper.type == 'SkipNonFiniteAmpOptimWrapper'
    assert cfg.optim_wrapper.loss_scale == 'dynamic'
    assert amp_type('OptimWrapper') == 'mmpretrain.MixedPrecisionOptimWrapper'
    assert amp_type('mmpretrain.MixedPrecisionOptimWrapper') == (
        'mmpretrain.MixedPrecisionOptimWrapper'
    )
    # Dense configs name the wrapper with its registry's scope.
    assert amp_type('mmpretrain.SkipNonFiniteOptimWrapper') == (
        'mmpretrain.SkipNonFiniteAmpOptimWrapper'
    )
    with pytest.raises(ValueError, match="optim_wrapper.type is 'Custom'"):
        amp_type('Custom')


def test_all_processes_skip_the_same_updates(tmp_path, python, repo_root):
    """Two gloo processes, a NaN input on one of them: both skip that
    update (the AMP form too, whose CPU GradScaler checks nothing)."""
    env = dict(
        os.environ,
        MASTER_ADDR='127.0.0.1',
        MASTER_PORT=str(free_port()),
        OMP_NUM_THREADS='1',
    )
    worker = osp.join(repo_root, 'tests', 'engine', 'nonfinite_ddp_worker.py')
    outs = [tmp_path / f'rank{rank}.json' for rank in (0, 1)]
    procs = [
        subprocess.Popen(
            [python, worker, str(rank), str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank, out in enumerate(outs)
    ]
    logs = [p.communicate(timeout=180)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), (
        logs[0][-2000:] + logs[1][-2000:]
    )
    rank0, rank1 = (json.loads(out.read_text()) for out in outs)
    assert rank0 == rank1
    for kind, weights in rank0.items():
        assert weights[1] == weights[0], kind  # skipped on both
        assert weights[2] != weights[1], kind
        assert all(math.isfinite(w) for w in weights[2]), kind
    # Rank 0 logs (every rank decides the same).
    assert 'Skipped the parameter update of iteration 2' in logs[0]


def test_mmpretrain_amp_flag_keeps_the_guard(
    repo_root, fashion_mnist_root, tmp_path, monkeypatch
):
    """mmpretrain's own train.py --amp (what `mim train mmpretrain` runs)
    swaps in 'AmpOptimWrapper': in mmpretrain's registry that is the
    guarded mixed-precision wrapper, which also runs on the CPU; the update
    of a batch with a NaN pixel is skipped."""
    import importlib.util
    import sys

    import mmpretrain

    from mmlvit.engine.optimizers.skip_nonfinite import (
        SkipNonFiniteAmpOptimWrapper,
    )

    path = osp.join(
        osp.dirname(mmpretrain.__file__), '.mim', 'tools', 'train.py'
    )
    spec = importlib.util.spec_from_file_location('mmpretrain_train', path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    monkeypatch.setattr(sys, 'argv', ['train.py', TINY, '--amp'])
    cfg = tool.merge_args(
        tiny_cfg(repo_root, fashion_mnist_root, tmp_path, iters=3),
        tool.parse_args(),
    )
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    probe = BadBatches(nan_iters=(2,))
    runner = Runner.from_cfg(cfg)
    runner.register_hook(probe)
    with warnings_logged() as texts:
        runner.train()
    assert isinstance(runner.optim_wrapper, SkipNonFiniteAmpOptimWrapper)
    assert probe.weights_changed == {1: True, 2: False, 3: True}
    assert any(t.startswith('Iteration 2: the loss is nan') for t in texts), (
        texts
    )
