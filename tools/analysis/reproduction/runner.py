"""The grid of runs and its runner: the teacher (trained once if missing),
then every run trained and tested by a real mmengine Runner, one after the
other or ``jobs`` at a time in worker processes, each result appended to the
CSV as soon as it is known."""

import multiprocessing
import os
import os.path as osp
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch
from mmengine.logging import MMLogger
from mmengine.runner import Runner

from .configs import (
    ROOT,
    SOFTMAX,
    TEACHER_CONFIG,
    limit_data,
    run_config,
    teacher_config,
)
from .records import Run, RunResult, append_result

DISTILL_MODES = dict(off=(False,), on=(True,), both=(False, True))


def split_setting(entry, distill):
    """(setting, distillation modes) of a ``--settings`` entry: ``NAME``
    follows ``distill`` ('off', 'on' or 'both'); ``NAME+distill`` is NAME
    with distillation only."""
    if entry.endswith('+distill'):
        return entry[: -len('+distill')], (True,)
    return entry, DISTILL_MODES[distill]


def grid(operators, settings, distill, lambdas, epochs, seeds, targets):
    """Every run the arguments ask for, seed by seed (all of seed 0 first).

    The softmax reference is run once per target (without distillation),
    whatever the operators; runs without distillation have lambda 0.

    Returns:
        list[Run]
    """
    runs = []
    for seed in seeds:
        for target in targets:
            for operator in operators:
                for entry in settings:
                    setting, modes = split_setting(entry, distill)
                    softmax = setting == SOFTMAX
                    for distilled in modes:
                        if softmax and (distilled or operator != operators[0]):
                            continue  # one softmax reference per target
                        for lam in lambdas if distilled else [0]:
                            runs.extend(
                                Run(
                                    dataset=target,
                                    operator=SOFTMAX if softmax else operator,
                                    setting=setting,
                                    distill=distilled,
                                    lam=float(lam),
                                    epochs=n,
                                    seed=seed,
                                )
                                for n in epochs
                            )
    return runs


def run_one(cfg):
    """Train, then evaluate on the target's test split; return top-1 %."""
    runner = Runner.from_cfg(cfg)
    runner.train()
    metrics = runner.test()
    MMLogger._instance_dict.clear()  # one log file per run
    return float(metrics['accuracy/top1'])


def train_and_test(run, teacher, work_root, train_indices, test_indices):
    """Build, train and test one run: (top-1 %, wall seconds)."""
    cfg = run_config(run, teacher, osp.join(work_root, run.name))
    limit_data(cfg, train_indices, test_indices)
    started = time.time()
    top1 = run_one(cfg)
    return top1, time.time() - started


class MissingTeacherError(SystemExit):
    """The teacher checkpoint does not exist and training one was not
    asked for."""


def ensure_teacher(
    path, work_root, train=False, train_indices=None, test_indices=None
):
    """The teacher checkpoint: the file at ``path``; or, when it is missing
    and ``train`` is set, train it once with the teacher config and keep its
    weights (state dict only) there.

    Raises:
        MissingTeacherError: No file at ``path`` and ``train`` is False.
    """
    if osp.isfile(path):
        return path
    if not train:
        raise MissingTeacherError(
            f'No teacher checkpoint at {path}. Check the --teacher path, or '
            'pass --train-teacher to train a new teacher and save it there '
            '(about 13 minutes on 2 CPU cores with the full data).'
        )
    print(f'No teacher at {path}: training it with {TEACHER_CONFIG}')
    cfg = teacher_config(osp.join(work_root, 'teacher'))
    limit_data(cfg, train_indices, test_indices)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].persistent_workers = cfg[loader].num_workers > 0
    started = time.time()
    runner = Runner.from_cfg(cfg)
    runner.train()
    metrics = runner.test()
    wall = time.time() - started
    MMLogger._instance_dict.clear()
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    state = {
        k: v.detach().clone() for k, v in runner.model.state_dict().items()
    }
    torch.save(
        {
            'state_dict': state,
            'meta': {
                'fashion_mnist_test_top1': metrics['accuracy/top1'],
                'config': osp.relpath(TEACHER_CONFIG, ROOT),
                'train_wall_s': round(wall, 1),
                'torch_threads': torch.get_num_threads(),
            },
        },
        path,
    )
    print(
        f'Teacher: {metrics["accuracy/top1"]:.2f}% on the Fashion-MNIST '
        f'test split after {wall / 60:.1f} min, saved to {path}'
    )
    return path


def run_grid(
    todo,
    out,
    teacher,
    work_root,
    jobs=1,
    threads=1,
    train_indices=None,
    test_indices=None,
):
    """Train and test every run of ``todo``, appending each result to the
    CSV ``out`` as soon as it is known, with progress and the grid's ETA.

    Args:
        todo (list[Run]): The runs.
        out (str): The CSV.
        teacher (str): Teacher checkpoint.
        work_root (str): Parent of the runs' work directories.
        jobs (int): Runs trained at once; above 1, each in its own worker
            process (spawned) with ``threads`` torch threads.
        threads (int): Torch CPU threads per worker.
        train_indices, test_indices (int, optional): Train / test on only
            the first images of the splits.
    """
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    started = time.time()

    def record(n, run, top1, wall):
        append_result(out, RunResult(run, top1, wall, device))
        elapsed = time.time() - started
        eta = elapsed / (n + 1) * (len(todo) - n - 1)
        print(
            f'[{n + 1}/{len(todo)}] {run.name}: top-1 {top1:.2f}% in '
            f'{wall:.0f} s; grid ETA {eta / 60:.1f} min',
            flush=True,
        )

    data = (teacher, work_root, train_indices, test_indices)
    done = in_workers(train_and_test, todo, data, jobs, threads)
    for n, (run, result) in enumerate(done):
        record(n, run, *result)


def in_workers(fn, items, args=(), jobs=1, threads=1):
    """``fn(item, *args)`` for every item: yield ``(item, result)`` as each
    finishes, in this process one after the other (``jobs`` 1) or ``jobs``
    at a time in spawned worker processes with ``threads`` torch threads
    each (``fn`` must then be importable: a module-level function).
    """
    if jobs == 1:
        for item in items:
            yield item, fn(item, *args)
        return
    spawn = multiprocessing.get_context('spawn')
    with ProcessPoolExecutor(
        jobs,
        mp_context=spawn,
        initializer=torch.set_num_threads,
        initargs=(threads,),
    ) as pool:
        futures = {pool.submit(fn, item, *args): item for item in items}
        for future in as_completed(futures):
            yield futures[future], future.result()
