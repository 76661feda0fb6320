"""End-to-end distillation with the user's tools (subprocesses): MLPCopy +
AttentionDistiller with a GLA student on a Fashion-MNIST subset, --resume,
tools/test.py on the saved student, and two-process CPU DDP."""

import json
import os

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import load_checkpoint
from mmpretrain.registry import MODELS
from tool_runs import launch, resume_in_copy, run_log

from mmlvit.checkpoint import load_checkpoint_file

CONFIG = 'tests/data/configs/tiny_gla_distill_fmnist.py'


def teacher_options(path):
    return ['--cfg-options', f'model.teacher_checkpoint={path}']


@pytest.fixture(scope='module')
def config(repo_root):
    init_default_scope('mmpretrain')
    return Config.fromfile(os.path.join(repo_root, CONFIG))


@pytest.fixture(scope='module')
def teacher_ckpt(config, tmp_path_factory):
    """The softmax teacher (and MLPCopy source), in mmpretrain's format.

    PyTorch's default Linear init (std ~ 1/sqrt(3 fan_in)), not the
    config's TruncNormal(0.02): attention outputs of a trained ViT's scale
    rather than near zero, so that matching them takes more than shrinking
    the student's outputs.
    """
    torch.manual_seed(0)
    teacher = MODELS.build(config.model.teacher)
    path = tmp_path_factory.mktemp('teacher') / 'teacher.pth'
    torch.save(dict(state_dict=teacher.state_dict(), meta=dict()), path)
    return path


@pytest.fixture(scope='module')
def distilled(
    tmp_path_factory, repo_root, python, fashion_mnist_root, teacher_ckpt
):
    """Three epochs (4 iterations each) through tools/train.py."""
    work_dir = tmp_path_factory.mktemp('distill')
    log = run_log(
        [
            python,
            'tools/train.py',
            CONFIG,
            '--work-dir',
            str(work_dir),
            *teacher_options(teacher_ckpt),
            'train_cfg.max_epochs=3',
        ],
        repo_root,
    )
    return work_dir, log


def scalars(work_dir):
    (path,) = work_dir.glob('*/vis_data/scalars.json')
    return [json.loads(line) for line in path.read_text().splitlines()]


def silent_student_loss(config, teacher_ckpt, repo_root):
    """50 x the mean block MSE of a student whose attention outputs are 0,
    on 32 training images: the level that shrinking outputs alone reaches."""
    from mmpretrain.registry import DATASETS

    from mmlvit.models.distillers import AttentionRecording

    teacher = MODELS.build(config.model.teacher)
    load_checkpoint(teacher, str(teacher_ckpt), strict=True)
    dataset_cfg = config.train_dataloader.dataset.copy()
    dataset_cfg.data_root = os.path.join(repo_root, dataset_cfg.data_root)
    dataset = DATASETS.build(dataset_cfg)
    preprocessor = MODELS.build(
        dict(type='ClsDataPreprocessor', **config.data_preprocessor)
    )
    items = [dataset[i] for i in range(32)]
    inputs = preprocessor(
        dict(inputs=[item['inputs'] for item in items]), training=True
    )['inputs']
    with torch.no_grad(), AttentionRecording(teacher, [0, 1]) as record:
        teacher.eval()(inputs, mode='tensor')
    return (
        50 * sum(o.pow(2).mean().item() for o in record.outputs.values()) / 2
    )


def test_mlpcopy_and_distillation_loss_falls(
    distilled, config, teacher_ckpt, repo_root
):
    work_dir, log = distilled
    assert 'Softmax-to-linear init: setting=MLPCopy' in log
    assert f'(from {teacher_ckpt})' in log
    steps = [s for s in scalars(work_dir) if 'loss_distill' in s]
    assert len(steps) == 12
    assert all('loss_task' in s and 'attn_out_mse.1' in s for s in steps)
    first = sum(s['loss_distill'] for s in steps[:3]) / 3
    last = sum(s['loss_distill'] for s in steps[-3:]) / 3
    assert last < 0.7 * first, (first, last)
    # The student matches the teacher's outputs, not only their scale.
    assert last < 0.7 * silent_student_loss(config, teacher_ckpt, repo_root)
    for s in steps:  # total = task + distill; per-block values not summed
        assert s['loss'] == pytest.approx(
            s['loss_task'] + s['loss_distill'], rel=1e-3
        )


def test_checkpoint_is_a_plain_student(distilled, config):
    work_dir, _ = distilled
    state = load_checkpoint_file(work_dir / 'epoch_3.pth')['state_dict']
    assert not any(k.startswith(('teacher.', 'student.')) for k in state)
    student = MODELS.build(config.model.student)
    assert set(state) == set(student.state_dict())
    load_checkpoint(student, str(work_dir / 'epoch_3.pth'), strict=True)


def test_test_tool_evaluates_saved_student(
    distilled, tmp_path, repo_root, python, teacher_ckpt
):
    work_dir, log = distilled
    out_file = tmp_path / 'metrics.json'
    run_log(
        [
            python,
            'tools/test.py',
            CONFIG,
            str(work_dir / 'epoch_3.pth'),
            '--work-dir',
            str(tmp_path),
            '--out',
            str(out_file),
            *teacher_options(teacher_ckpt),
        ],
        repo_root,
    )
    top1 = json.loads(out_file.read_text())['accuracy/top1']
    # The accuracy validated at the end of epoch 3 during training.
    assert f'Epoch(val) [3][2/2]    accuracy/top1: {top1:.4f}' in log


def test_resume_continues_distillation(
    distilled, tmp_path, repo_root, python, teacher_ckpt
):
    work_dir, _ = distilled
    resumed = tmp_path / 'resumed'
    log = resume_in_copy(
        python,
        CONFIG,
        work_dir,
        resumed,
        repo_root,
        f'model.teacher_checkpoint={teacher_ckpt}',
        'train_cfg.max_epochs=4',
    )
    assert 'resumed epoch: 3, iter: 12' in log
    assert 'Epoch(train) [4][4/4]' in log and 'Epoch(train) [1]' not in log
    assert 'softmax weights are not copied again' in log
    ckpt = load_checkpoint_file(resumed / 'epoch_4.pth')
    assert ckpt['meta']['iter'] == 16
    assert not any(k.startswith('teacher.') for k in ckpt['state_dict'])


def test_dist_train_two_processes(
    distilled, tmp_path, repo_root, python, teacher_ckpt
):
    """2 gloo processes x batch 16 == 1 process x batch 32 after epoch 1."""
    work_dir, _ = distilled
    log = launch(
        'tools/dist_train.sh',
        [
            CONFIG,
            '2',
            '--work-dir',
            str(tmp_path),
            *teacher_options(teacher_ckpt),
            'train_cfg.max_epochs=1',
            'train_dataloader.batch_size=16',
        ],
        repo_root,
        python,
    )
    assert 'Distributed training: True' in log
    if torch.cuda.is_available():
        assert 'GPU number: 2' in log
    else:  # two CPU processes, not two GPUs
        assert 'Processes: 2 (CPU, no CUDA GPU)' in log
    dist = load_checkpoint_file(tmp_path / 'epoch_1.pth')['state_dict']
    one = load_checkpoint_file(work_dir / 'epoch_1.pth')['state_dict']
    assert set(dist) == set(one)
    for key, value in one.items():
        torch.testing.assert_close(
            dist[key], value, rtol=1e-4, atol=1e-5, msg=key
        )
