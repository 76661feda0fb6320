"""The dense grid's configs (docs/dense_reproduction.md): the ready-made
UperNet / Mask R-CNN configs under ``configs/dense_fashion_mnist`` with
their model and training recipe unchanged, pointed at a (smaller) Dense
Fashion-MNIST set and cut to a short schedule that is evaluated once, at
its end; and that data set, generated when missing.
"""

import importlib.util
import os.path as osp

from mmengine.config import Config

from .configs import ROOT, schedule

CONFIGS = osp.join(ROOT, 'configs', 'dense_fashion_mnist')
# Task -> the config-name prefix of its model.
TASKS = {'seg': 'upernet', 'det': 'mask-rcnn'}
# Setting -> the config-name part naming the backbone and its start.
SETTINGS = {
    'random': 'gla_random',
    'mlpcopy+distill': 'gla_mlpcopy-distill',
    'fullcopy+distill': 'gla_fullcopy-distill',
    'softmax': 'softmax',
}
PREPARE_TOOL = osp.join(
    ROOT, 'tools', 'data', 'prepare_dense_fashion_mnist.py'
)
FASHION_MNIST = osp.join(ROOT, 'data', 'fashion_mnist')


def config_path(task, setting):
    """The ready-made config of a task and setting."""
    return osp.join(
        CONFIGS,
        f'{TASKS[task]}_vit-tiny-p4_{SETTINGS[setting]}_dense-fmnist.py',
    )


def dense_run_config(run, data_root, work_dir):
    """The mmengine config of one run: the ready-made config with

    - the data (train, val and test loaders, the COCO evaluator's
      annotation file) read from ``data_root`` and the backbone's
      ``img_size`` (and UperNet's padding size) set to ``run.canvas``;
    - ``run.epochs`` epochs with the config's own optimiser and its
      learning-rate schedule (one linear warm-up epoch, then cosine to the
      last epoch; no warm-up in a 1-epoch run), which the classification
      grid shares;
    - no validation during training, so the checkpoint hook keeps only the
      last checkpoint (no best-of selection): the caller's ``runner.test()``
      on the test canvases is the one, final evaluation;
    - seed ``run.seed`` and the work directory ``work_dir``.

    Args:
        run (dense_records.DenseRun): The run.
        data_root (str): Dense Fashion-MNIST folder.
        work_dir (str): The run's work directory.

    Returns:
        mmengine.Config
    """
    cfg = Config.fromfile(config_path(run.task, run.setting))
    model = cfg.model.student if 'student' in cfg.model else cfg.model
    model.backbone.img_size = run.canvas
    if run.task == 'seg':
        model.data_preprocessor.size = (run.canvas, run.canvas)
    root = data_root.rstrip('/') + '/'
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = root
        cfg[loader].num_workers = 0
        cfg[loader].persistent_workers = False
    if run.task == 'det':
        cfg.test_evaluator.ann_file = osp.join(
            root, 'annotations', 'instances_test.json'
        )
    cfg.train_cfg = dict(
        type='EpochBasedTrainLoop',
        max_epochs=run.epochs,
        val_interval=run.epochs,
    )
    cfg.param_scheduler = schedule(run.epochs)
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.default_hooks.checkpoint = dict(
        type='mmpretrain.SafeCheckpointHook', interval=-1
    )
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=10)
    cfg.randomness = dict(seed=run.seed)
    cfg.work_dir = work_dir
    return cfg


def final_metrics(task, metrics):
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
    unless it already holds them (``tools/data/prepare_dense_fashion_mnist.py``
    does the work, and skips a complete set)."""
    spec = importlib.util.spec_from_file_location(
        'prepare_dense_fashion_mnist', PREPARE_TOOL
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.prepare(
        FASHION_MNIST,
        data_root,
        num_train,
        num_test,
        canvas,
        seed,
        items=items,
        scale=scale,
    )
