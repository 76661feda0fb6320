"""Small-scale dense reproduction (docs/dense_reproduction.md): does a
linear (GLA) backbone started by MLPCopy or FullCopy from the tiny softmax
classifier, with every block's attention output distilled from it (Qin et
al., arXiv:2609.35745), beat a Random start and approach the softmax
backbone on semantic segmentation (UperNet, mIoU) and detection / instance
segmentation (Mask R-CNN, box and mask AP)?

Each run is a real mmengine Runner built from the ready-made configs under
configs/dense_fashion_mnist (model and recipe unchanged), trained on a
Dense Fashion-MNIST set small enough for a 2-core CPU (by default 64 px
canvases of 1-3 items, generated into --data-root when missing) for a few
hundred iterations, then evaluated once on the test canvases (mmseg's
IoUMetric, mmdet's CocoMetric).

Each finished run appends one row to the CSV; a re-run of the same command
skips the rows already there, so a half-finished grid resumes. Runs go seed
by seed, and ``--jobs N`` trains N runs at once in worker processes of
``--threads`` threads each. Next to the CSV go the Markdown tables (mean +-
std over seeds, gain vs Random; ``CSV-stem.md``) and the plot
(``CSV-stem.png``).

Example (the committed grid, about an hour on 2 cores):
    OMP_NUM_THREADS=1 python tools/analysis/reproduce_dense.py \\
        --seeds 0 1 2 --jobs 2 --threads 1 \\
        --out results/dense_fashion_mnist.csv
    # only the tables and plot of an existing CSV
    python tools/analysis/reproduce_dense.py --report \\
        --out results/dense_fashion_mnist.csv
"""

import argparse
import os.path as osp

from ..cli import (
    add_grid_options,
    enter_repository,
    results_to_report,
    run_missing,
    set_threads,
)
from ..configs import DEFAULT_TEACHER
from ..data import add_layout_options
from ..runner import MissingTeacherError
from ..summary import teacher_line
from . import runner
from .configs import DENSE_SETTINGS, TASKS, ensure_data
from .plots import plot_dense
from .records import DenseResult
from .report import markdown


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Run the dense Random / copy + distill / softmax grid.'
    )
    parser.add_argument(
        '--tasks', nargs='+', default=list(TASKS), choices=list(TASKS)
    )
    parser.add_argument(
        '--settings',
        nargs='+',
        default=list(DENSE_SETTINGS),
        choices=list(DENSE_SETTINGS),
    )
    parser.add_argument(
        '--epochs',
        nargs='+',
        default=['seg=8', 'det=3'],
        help='training epochs, N for every task or TASK=N per task (the '
        'first epoch is the linear warm-up); iterations = epochs x train '
        'images / 8',
    )
    data = parser.add_argument_group('data (Dense Fashion-MNIST)')
    data.add_argument('--data-root', default='data/dense_fashion_mnist_64')
    data.add_argument('--canvas', type=int, default=64, help='canvas px')
    data.add_argument('--train-images', type=int, default=400)
    data.add_argument('--test-images', type=int, default=120)
    add_layout_options(data, items=(1, 3), scale=(1.0, 1.6))
    add_grid_options(
        parser, 'results/dense_fashion_mnist.csv', 'work_dirs/reproduce_dense'
    )
    args = parser.parse_args(argv)
    args.epochs = task_epochs(args.epochs, args.tasks, parser)
    return args


def task_epochs(entries, tasks, parser):
    """Task -> epochs from ``--epochs`` entries: one number for every
    task, or ``TASK=N`` for each task of ``tasks``."""
    try:
        if len(entries) == 1 and '=' not in entries[0]:
            return {task: int(entries[0]) for task in tasks}
        epochs = {}
        for entry in entries:
            task, n = entry.split('=')
            epochs[task] = int(n)
    except ValueError:
        parser.error(f'--epochs: N or TASK=N entries, got {entries}')
    missing = [t for t in tasks if t not in epochs]
    if missing:
        parser.error(f'--epochs gives no epochs for {missing}')
    return epochs


def report(out):
    """Write the Markdown tables and the plot next to the CSV ``out`` and
    print the tables; return the results."""
    results = results_to_report(out, DenseResult)
    stem = osp.splitext(out)[0]
    text = markdown(results)
    with open(stem + '.md', 'w') as f:
        f.write(text)
    plot_dense(results, stem + '.png')
    print(text)
    print(f'Results: {out}, tables: {stem}.md, plot: {stem}.png')
    return results


def main(argv=None):
    """Run the grid (or only report on ``--out``); return the results in
    the CSV (a list of ``DenseResult``)."""
    args = parse_args(argv)
    enter_repository(args, 'out', 'work_root', 'data_root')
    if args.report:
        return report(args.out)
    if not osp.isfile(DEFAULT_TEACHER):
        raise MissingTeacherError(
            f'No teacher checkpoint at {DEFAULT_TEACHER} (the configs '
            'copy from and distill from it): see docs/reproduction.md.'
        )
    print(teacher_line(DEFAULT_TEACHER))
    set_threads(args)
    ensure_data(
        args.data_root,
        args.canvas,
        args.train_images,
        args.test_images,
        args.items,
        args.scale,
    )
    runs = runner.dense_grid(
        args.tasks,
        args.settings,
        args.seeds,
        args.canvas,
        args.train_images,
        args.epochs,
    )
    context = (args.data_root, args.work_root)
    run_missing(args, runs, DenseResult, runner.train_and_test, context)
    return report(args.out)
