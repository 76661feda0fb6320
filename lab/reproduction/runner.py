"""Running a grid: one config trained then tested by a real mmengine
Runner; the runs of a grid one after the other or ``jobs`` at a time in
worker processes, each result appended to the CSV as soon as it is known,
with progress and the grid's ETA."""

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch
from mmengine.logging import MMLogger
from mmengine.runner import Runner

from .records import append_result


class MissingTeacherError(SystemExit):
    """The teacher checkpoint does not exist and training one was not
    asked for."""


def device() -> str:
    """Where runs train: ``'cuda'`` or ``'cpu'``."""
    return 'cuda' if torch.cuda.is_available() else 'cpu'


def train_then_test(cfg) -> tuple:
    """Build a Runner from ``cfg``, train it, test it once.

    Returns:
        tuple: (the Runner, its test metrics (dict), seconds to build and
        train, seconds to test).
    """
    started = time.time()
    runner = Runner.from_cfg(cfg)
    runner.train()
    trained = time.time()
    metrics = runner.test()
    MMLogger._instance_dict.clear()  # one log file per run
    return runner, metrics, trained - started, time.time() - trained


def in_workers(fn, items, args=(), jobs=1, threads=1, fresh=False):
    """``fn(item, *args)`` for every item: yield ``(item, result)`` as each
    finishes, in this process one after the other (``jobs`` 1) or ``jobs``
    at a time in spawned worker processes with ``threads`` torch threads
    each (``fn`` must then be importable: a module-level function).
    ``fresh``: each item in a new worker process, even with ``jobs`` 1 (so
    the process's peak memory is the item's).
    """
    if jobs == 1 and not fresh:
        for item in items:
            yield item, fn(item, *args)
        return
    spawn = multiprocessing.get_context('spawn')
    with ProcessPoolExecutor(
        jobs,
        mp_context=spawn,
        initializer=torch.set_num_threads,
        initargs=(threads,),
        max_tasks_per_child=1 if fresh else None,
    ) as pool:
        futures = {pool.submit(fn, item, *args): item for item in items}
        for future in as_completed(futures):
            yield futures[future], future.result()


def run_grid(todo, out, train_and_test, args=(), jobs=1, threads=1):
    """Train and test every run of ``todo`` with
    ``train_and_test(run, *args)`` (a task's result record), appending each
    result to the CSV ``out`` as soon as it is known, with its
    ``progress()`` and the grid's ETA.

    Args:
        todo (list): The runs.
        out (str): The CSV.
        train_and_test (callable): A module-level function (it may run in
            a worker process).
        args (tuple): Its arguments after the run.
        jobs (int): Runs trained at once; above 1, each in its own spawned
            worker process with ``threads`` torch threads.
        threads (int): Torch CPU threads per worker.
    """
    started = time.time()
    done = in_workers(train_and_test, todo, args, jobs, threads)
    for n, (run, result) in enumerate(done):
        append_result(out, result)
        eta = (time.time() - started) / (n + 1) * (len(todo) - n - 1)
        print(
            f'[{n + 1}/{len(todo)}] {run.name}: {result.progress()}; '
            f'grid ETA {eta / 60:.1f} min',
            flush=True,
        )
