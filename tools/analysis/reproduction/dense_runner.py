"""The dense grid and its runner: every run trained, then tested once on
the test canvases by a real mmengine Runner (MMSegmentation's or
MMDetection's), one after the other or ``jobs`` at a time in worker
processes, each result appended to the CSV as soon as it is known."""

import os.path as osp
import time

import torch
from mmengine.logging import MMLogger
from mmengine.runner import Runner

from .dense_configs import dense_run_config, final_metrics
from .dense_records import DenseResult, DenseRun, append_dense_result
from .runner import in_workers


def dense_grid(tasks, settings, seeds, canvas, train_images, epochs):
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


def train_and_test(run, data_root, work_root):
    """Build, train and test one run: its :class:`DenseResult`."""
    cfg = dense_run_config(run, data_root, osp.join(work_root, run.name))
    started = time.time()
    runner = Runner.from_cfg(cfg)
    runner.train()
    trained = time.time()
    metrics = runner.test()
    done = time.time()
    MMLogger._instance_dict.clear()  # one log file per run
    return DenseResult(
        run=run,
        iters=runner.iter,
        metrics=final_metrics(run.task, metrics),
        train_min=(trained - started) / 60,
        eval_min=(done - trained) / 60,
        device='cuda' if torch.cuda.is_available() else 'cpu',
    )


def run_dense_grid(todo, out, data_root, work_root, jobs=1, threads=1):
    """Train and test every run of ``todo``, appending each result to the
    CSV ``out`` as soon as it is known, with progress and the grid's ETA.

    Args:
        todo (list[DenseRun]): The runs.
        out (str): The CSV.
        data_root (str): Dense Fashion-MNIST folder.
        work_root (str): Parent of the runs' work directories.
        jobs (int): Runs trained at once; above 1, each in its own spawned
            worker process with ``threads`` torch threads.
        threads (int): Torch CPU threads per worker.
    """
    started = time.time()
    done = in_workers(
        train_and_test, todo, (data_root, work_root), jobs, threads
    )
    for n, (run, result) in enumerate(done):
        append_dense_result(out, result)
        elapsed = time.time() - started
        eta = elapsed / (n + 1) * (len(todo) - n - 1)
        scores = ', '.join(f'{m} {v:.2f}' for m, v in result.metrics.items())
        print(
            f'[{n + 1}/{len(todo)}] {run.name}: {scores} after '
            f'{result.iters} iterations, {result.train_min:.1f} + '
            f'{result.eval_min:.1f} min; grid ETA {eta / 60:.0f} min',
            flush=True,
        )
