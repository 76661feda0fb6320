"""SoftmaxToLinearInitHook in a real mmengine Runner (Fashion-MNIST subset):
it copies after mmengine's init, never again on resume/load_from, and its
errors reach the user."""

import functools
import glob
import os.path as osp
import uuid

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmpretrain.registry import HOOKS
from tiny_runs import train_from_cfg
from tiny_vit import TINY_ARCH, backbone_cfg, classifier_cfg

from mmlvit.checkpoint import CheckpointError, load_checkpoint_file
from mmlvit.engine.hooks import SoftmaxToLinearInitHook
from mmlvit.transfer import TransferError
from mmlvit.utils.model import find_student

TINY = 'tests/data/configs/tiny_softmax_fmnist.py'
MLP = '.ffn.layers.'


class Probe(Hook):
    """Records the student's weights when before_train has run."""

    priority = 'LOWEST'

    def before_train(self, runner):
        self.state = {
            k: v.detach().clone()
            for k, v in find_student(runner.model).state_dict().items()
        }
        self.teacher = getattr(runner.model, 'teacher', None)


@pytest.fixture(scope='module')
def softmax_ckpt(tmp_path_factory):
    """A softmax classifier of the tiny config's shape, saved in mmpretrain
    layout, with values no fresh init has."""
    init_default_scope('mmpretrain')
    torch.manual_seed(5)
    from mmpretrain.registry import MODELS

    model = MODELS.build(classifier_cfg(backbone_cfg()))
    state = {k: v + 1 for k, v in model.state_dict().items()}
    path = tmp_path_factory.mktemp('softmax') / 'softmax_vit.pth'
    torch.save({'state_dict': state, 'meta': {}}, path)
    return path, state


@pytest.fixture
def make_cfg(repo_root, fashion_mnist_root):
    """make_cfg(work_dir, model=None, **hook): the tiny config training
    ``model`` (a linear tiny classifier by default) for one epoch of two
    iterations, with a SoftmaxToLinearInitHook(**hook)."""
    return functools.partial(tiny_cfg, repo_root, fashion_mnist_root)


def tiny_cfg(repo_root, data_root, work_dir, model=None, **hook):
    cfg = Config.fromfile(osp.join(repo_root, TINY))
    cfg.experiment_name = f'init_hook_{uuid.uuid4().hex[:8]}'
    cfg.work_dir = str(work_dir)
    cfg.model = model or classifier_cfg(backbone_cfg('ReLULinearAttention'))
    cfg.train_dataloader.dataset.data_root = data_root
    cfg.train_dataloader.dataset.indices = 64  # 2 iterations per epoch
    cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = None
    cfg.test_dataloader = cfg.test_cfg = cfg.test_evaluator = None
    cfg.train_cfg = dict(by_epoch=True, max_epochs=1)
    cfg.param_scheduler = None
    cfg.optim_wrapper.optimizer.lr = 1e-2
    cfg.default_hooks.checkpoint = dict(type='CheckpointHook', interval=1)
    cfg.custom_hooks = [dict(type='SoftmaxToLinearInitHook', **hook)]
    return cfg


def train(cfg):
    """Train ``cfg``; returns its Probe and the text of its log."""
    probe = Probe()
    train_from_cfg(cfg, probe)
    log = glob.glob(osp.join(cfg.work_dir, '*', '*.log'))
    return probe, open(max(log, key=osp.getmtime)).read()


def mlp_keys(state):
    return [k for k in state if MLP in k]


def test_copy_then_resume_and_load_from_do_not_copy(
    softmax_ckpt, tmp_path, make_cfg
):
    path, softmax = softmax_ckpt
    work_dir = tmp_path / 'run'
    cfg = make_cfg(work_dir, checkpoint=str(path), setting='MLPCopy')
    probe, log = train(cfg)
    assert mlp_keys(probe.state)
    for key in mlp_keys(probe.state):
        assert torch.equal(probe.state[key], softmax[key]), key
    for key in (
        'backbone.layers.0.attn.qkv.weight',
        'backbone.ln1.weight',
        'backbone.pos_embed',
    ):
        assert not torch.equal(probe.state[key], softmax[key]), key
    assert 'Softmax-to-linear init: setting=MLPCopy' in log
    assert 'mlp          8 / 8,384' in log
    assert 'unused, component not requested' in log

    trained = load_checkpoint_file(work_dir / 'epoch_1.pth')['state_dict']
    key = mlp_keys(trained)[0]
    assert not torch.equal(trained[key], softmax[key])  # it did train

    # --resume: the weights come from epoch_1.pth, not the softmax file.
    cfg = make_cfg(work_dir, checkpoint=str(path), setting='MLPCopy')
    cfg.resume = True
    cfg.train_cfg.max_epochs = 2
    probe, log = train(cfg)
    for key in mlp_keys(probe.state):
        assert torch.equal(probe.state[key], trained[key]), key
    assert 'not copied again' in log
    assert 'Softmax-to-linear init' not in log

    # load_from: likewise.
    cfg = make_cfg(
        tmp_path / 'load_from', checkpoint=str(path), setting='FullCopy'
    )
    cfg.load_from = str(work_dir / 'epoch_1.pth')
    probe, log = train(cfg)
    for key in probe.state:
        assert torch.equal(probe.state[key], trained[key]), key
    assert 'not copied again' in log


def test_student_inside_the_distiller(softmax_ckpt, tmp_path, make_cfg):
    path, softmax = softmax_ckpt
    model = dict(
        type='AttentionDistiller',
        student=classifier_cfg(backbone_cfg('ReLULinearAttention')),
        teacher=classifier_cfg(backbone_cfg()),
        teacher_checkpoint=str(path),
    )
    # No checkpoint on the hook: it copies from model.teacher_checkpoint.
    cfg = make_cfg(tmp_path, model=model, setting='FullCopy')
    probe, log = train(cfg)
    assert f'(from {path})' in log
    for key, value in probe.state.items():
        if key.startswith('head.'):
            assert not torch.equal(value, softmax[key]), key
        else:
            assert torch.equal(value, softmax[key]), key
    for key, value in probe.teacher.state_dict().items():
        assert torch.equal(value, softmax[key]), key


def test_errors_reach_the_runner(softmax_ckpt, tmp_path, make_cfg):
    path, _ = softmax_ckpt
    wide = Config(
        dict(
            model=classifier_cfg(
                backbone_cfg(
                    'ReLULinearAttention',
                    arch=dict(
                        TINY_ARCH, embed_dims=48, feedforward_channels=96
                    ),
                )
            )
        )
    )
    cfg = make_cfg(
        tmp_path / 'wide',
        model=wide.model,
        checkpoint=str(path),
        setting='MLPCopy',
    )
    with pytest.raises(
        TransferError,
        match=r'ffn\.layers\.0\.0\.weight: checkpoint '
        r'\(64, 32\) vs student \(96, 48\)',
    ):
        Runner.from_cfg(cfg).train()

    mystery = tmp_path / 'mystery.pth'
    torch.save({'encoder.weight': torch.zeros(1)}, mystery)
    cfg = make_cfg(tmp_path / 'mystery', checkpoint=str(mystery))
    with pytest.raises(
        CheckpointError, match=r'mystery\.pth.*encoder\.weight'
    ):
        Runner.from_cfg(cfg).train()

    cfg = make_cfg(tmp_path / 'unset', setting='Copy')
    with pytest.raises(
        ValueError,
        match=r"setting Copy copies \['attn_qkv',"
        r" 'attn_proj', 'layer_scale', 'attn_pool'\] but no softmax "
        r'checkpoint is set.*'
        r'model\.teacher_checkpoint',
    ):
        Runner.from_cfg(cfg).train()

    cfg = make_cfg(tmp_path / 'typo', checkpoint=str(path), setting='MLPcopy')
    with pytest.raises(TransferError, match="Unknown init setting 'MLPcopy'"):
        Runner.from_cfg(cfg)


def test_analytical_setting_reads_no_checkpoint(build_classifier):
    model = build_classifier(backbone_cfg('ReLULinearAttention'))
    hook = SoftmaxToLinearInitHook(setting='Mimetic')
    report = hook.initialise(model)
    assert report.keys('analytical') and not report.keys('copied')


def test_hook_is_registered_and_validates_format():
    assert HOOKS.get('SoftmaxToLinearInitHook') is SoftmaxToLinearInitHook
    with pytest.raises(ValueError, match='Unknown checkpoint format'):
        SoftmaxToLinearInitHook('x.pth', format='tf')


def test_find_student_unwraps():
    student = torch.nn.Linear(2, 2)
    distiller = torch.nn.Module()
    distiller.student = student
    assert find_student(distiller) is student
    assert find_student(torch.nn.DataParallel(distiller)) is student
    assert find_student(student) is student
