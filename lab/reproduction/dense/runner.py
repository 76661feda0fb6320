"""The dense grid: its runs, and one run trained, then tested once on the
test canvases by a real mmengine Runner (MMSegmentation's or
MMDetection's)."""

import os.path as osp

from ..runner import device, train_then_test
from .configs import dense_run_config, final_metrics
from .records import DenseResult, DenseRun


def dense_grid(tasks, settings, seeds, canvas, train_images, epochs) -> list:
    """Every run the arguments ask for, seed by seed (all of seed 0
    first), within a seed task by task in the order given; ``epochs`` maps
    each task to its epochs.

    Returns:
        list[DenseRun]
    """
    return [
        DenseRun(task, setting, canvas, train_images, epochs[task], seed)
        for seed in seeds
        for task in tasks
        for setting in settings
    ]


def train_and_test(run, data_root, work_root) -> DenseResult:
    """Build, train and test one run: its :class:`DenseResult`."""
    cfg = dense_run_config(run, data_root, osp.join(work_root, run.name))
    runner, metrics, train_s, test_s = train_then_test(cfg)
    return DenseResult(
        run=run,
        iters=runner.iter,
        metrics=final_metrics(run.task, metrics),
        train_min=train_s / 60,
        eval_min=test_s / 60,
        device=device(),
    )
