"""The small UperNet and Mask R-CNN of configs/dense_fashion_mnist through
real mmengine Runners on a few Dense Fashion-MNIST canvases: the GLA
backbone is initialised from the shipped tiny softmax classifier (MLPCopy)
and distilled from its frozen backbone; the runs train, save student-only
checkpoints, resume and evaluate with IoUMetric / CocoMetric; the teacher
never changes."""

import json
import os
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

pytest.importorskip('mmseg')
pytest.importorskip('mmdet')

from lab.reproduction.data import (  # noqa: E402
    make_dense_fashion_mnist,
)
from mmlvit.checkpoint import load_checkpoint_file  # noqa: E402

SEG = 'configs/dense_fashion_mnist/upernet_vit-tiny-p4_gla_mlpcopy-distill_dense-fmnist.py'  # noqa: E501
DET = 'configs/dense_fashion_mnist/mask-rcnn_vit-tiny-p4_gla_mlpcopy-distill_dense-fmnist.py'  # noqa: E501
CANVAS = 64


@pytest.fixture(scope='module')
def dense_root(tmp_path_factory, fashion_mnist_root):
    """Six training and four test canvases of 64 px with 1-2 items."""
    root = str(tmp_path_factory.mktemp('dense_fmnist'))
    make_dense_fashion_mnist(
        fashion_mnist_root,
        root,
        num_train=6,
        num_test=4,
        canvas=CANVAS,
        items=(1, 2),
        scale=(1.0, 1.5),
    )
    return root


def small_run(path, repo_root, data_root, work_dir, max_epochs, resume=False):
    """The config on the small data: batch 2, every epoch evaluated and
    saved."""
    cfg = Config.fromfile(osp.join(repo_root, path))
    cfg.work_dir = str(work_dir)
    cfg.model.teacher_checkpoint = osp.join(
        repo_root, cfg.model.teacher_checkpoint
    )
    if cfg.default_scope == 'mmseg':
        cfg.model.student.data_preprocessor.size = (CANVAS, CANVAS)
    for split in ('train', 'val', 'test'):
        loader = cfg[f'{split}_dataloader']
        loader.batch_size = 2
        loader.dataset.data_root = data_root
        evaluator = cfg.get(f'{split}_evaluator')
        if evaluator and 'ann_file' in evaluator:
            evaluator.ann_file = osp.join(
                data_root, 'annotations/instances_test.json'
            )
    if cfg.default_scope == 'mmdet':
        cfg.train_dataloader.dataset.filter_cfg.min_size = 0
    cfg.train_cfg.update(max_epochs=max_epochs, val_interval=1)
    cfg.default_hooks.checkpoint.update(interval=1, max_keep_ckpts=-1)
    cfg.default_hooks.logger.interval = 1
    cfg.resume = resume
    return Runner.from_cfg(cfg)


def cfg_teacher_checkpoint(repo_root, path):
    return Config.fromfile(osp.join(repo_root, path)).model.teacher_checkpoint


def logged_metrics(work_dir):
    """Every evaluation's metrics from the run's scalars.json files."""
    rows = []
    for name in sorted(
        osp.join(root, f)
        for root, _, files in os.walk(work_dir)
        for f in files
        if f == 'scalars.json'
    ):
        with open(name) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


@pytest.mark.parametrize(
    'path, metrics',
    [
        (SEG, ['mIoU']),
        (DET, ['coco/bbox_mAP', 'coco/segm_mAP']),
    ],
    ids=['upernet', 'mask-rcnn'],
)
def test_trains_saves_resumes_and_evaluates(
    path, metrics, repo_root, dense_root, tmp_path
):
    work_dir = tmp_path / 'run'
    runner = small_run(path, repo_root, dense_root, work_dir, max_epochs=2)
    teacher_before = {
        k: v.clone() for k, v in runner.model.teacher.state_dict().items()
    }
    runner.train()
    model = runner.model
    for key, value in model.teacher.state_dict().items():
        assert torch.equal(value, teacher_before[key]), key

    # Student-only checkpoints: the plain segmentor/detector keys.
    state = load_checkpoint_file(str(work_dir / 'epoch_2.pth'))['state_dict']
    assert set(state) == set(model.student.state_dict())
    assert not any(k.startswith(('teacher.', 'student.')) for k in state)

    # The init hook copied the MLPs from the tiny softmax classifier.
    softmax = load_checkpoint_file(
        osp.join(
            repo_root, 'checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth'
        )
    )['state_dict']
    first = load_checkpoint_file(str(work_dir / 'epoch_1.pth'))['state_dict']
    mlp = 'backbone.layers.0.ffn.layers.1.weight'
    assert not torch.equal(first[mlp], softmax[mlp])  # trained from it
    assert torch.allclose(first[mlp], softmax[mlp], atol=0.05)

    # Both evaluations logged the task's metrics.
    evaluations = [r for r in logged_metrics(work_dir) if metrics[0] in r]
    assert len(evaluations) == 2
    for row in evaluations:
        for name in metrics:
            assert 0 <= row[name] <= 100

    # --resume: a third epoch from epoch 2's checkpoint, the teacher from
    # its own file again.
    resumed = small_run(
        path, repo_root, dense_root, work_dir, max_epochs=3, resume=True
    )
    resumed.train()
    assert resumed.epoch == 3
    assert resumed.iter == 3 * runner.iter // 2
    for key, value in resumed.model.teacher.state_dict().items():
        assert torch.equal(value, teacher_before[key]), key
    evaluations = [r for r in logged_metrics(work_dir) if metrics[0] in r]
    assert len(evaluations) == 3

    results = resumed.test()
    for name in metrics:
        assert name in results
