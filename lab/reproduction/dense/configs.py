"""The dense grid's configs (docs/dense_reproduction.md): the ready-made
UperNet / Mask R-CNN configs under ``configs/dense_fashion_mnist`` with
their model and training recipe unchanged, pointed at a (smaller) Dense
Fashion-MNIST set and cut to a short schedule that is evaluated once, at
its end; and that data set, generated when missing.
"""

import os.path as osp

from mmengine.config import Config

from ..configs import ROOT, SOFTMAX, evaluate_once_at_end
from ..data import prepare_dense_fashion_mnist

CONFIGS = osp.join(ROOT, 'configs', 'dense_fashion_mnist')
FASHION_MNIST = osp.join(ROOT, 'data', 'fashion_mnist')
# Task -> the config-name prefix of its model.
TASKS = {'seg': 'upernet', 'det': 'mask-rcnn'}
# The ``--settings`` entries (``mmlvit.transfer`` short names, ``+distill``
# for distillation) that have a ready-made config: GLA backbones, and the
# softmax backbone.
DENSE_SETTINGS = ('random', 'mlpcopy+distill', 'fullcopy+distill', SOFTMAX)


def config_path(task: str, setting: str) -> str:
    """The ready-made config of a task and setting:
    ``{model}_vit-tiny-p4_{backbone}_dense-fmnist.py`` with the backbone
    ``softmax`` or ``gla_{setting}`` (``+distill`` spelled ``-distill``)."""
    if setting not in DENSE_SETTINGS:
        raise ValueError(f'No ready-made dense config for {setting!r}.')
    backbone = SOFTMAX if setting == SOFTMAX else 'gla_' + setting
    return osp.join(
        CONFIGS,
        f'{TASKS[task]}_vit-tiny-p4_{backbone.replace("+", "-")}'
        '_dense-fmnist.py',
    )


def dense_run_config(run, data_root: str, work_dir: str) -> Config:
    """The mmengine config of one run: the ready-made config with

    - the data (train, val and test loaders, the COCO evaluator's
      annotation file) read from ``data_root`` and the backbone's
      ``img_size`` (and UperNet's padding size) set to ``run.canvas``;
    - ``run.epochs`` epochs with the config's own optimiser, the grid's
      short schedule and one evaluation at the end
      (:func:`lab.reproduction.configs.evaluate_once_at_end`);
    - seed ``run.seed`` and the work directory ``work_dir``.

    Args:
        run (records.DenseRun): The run.
        data_root (str): Dense Fashion-MNIST folder.
        work_dir (str): The run's work directory.
    """
    cfg = Config.fromfile(config_path(run.task, run.setting))
    model = cfg.model.student if 'student' in cfg.model else cfg.model
    model.backbone.img_size = run.canvas
    if run.task == 'seg':
        model.data_preprocessor.size = (run.canvas, run.canvas)
    root = data_root.rstrip('/') + '/'
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = root
    if run.task == 'det':
        cfg.test_evaluator.ann_file = osp.join(
            root, 'annotations', 'instances_test.json'
        )
    evaluate_once_at_end(cfg, run.epochs, run.seed, work_dir, 10)
    return cfg


def final_metrics(task: str, metrics: dict) -> dict:
    """The recorded metrics (percent) of a task from ``runner.test()``'s
    dict: mmseg's IoUMetric gives ``mIoU`` in percent, mmdet's CocoMetric
    ``coco/bbox_mAP`` and ``coco/segm_mAP`` as fractions."""
    if task == 'seg':
        return {'mIoU': float(metrics['mIoU'])}
    return {
        m: 100.0 * float(metrics[f'coco/{m}'])
        for m in ('bbox_mAP', 'segm_mAP')
    }


def ensure_data(data_root, canvas, num_train, num_test, items, scale, seed=0):
    """Generate Dense Fashion-MNIST into ``data_root`` with these settings
    unless it already holds them."""
    prepare_dense_fashion_mnist(
        FASHION_MNIST,
        data_root,
        num_train,
        num_test,
        canvas,
        seed,
        items=items,
        scale=scale,
    )
