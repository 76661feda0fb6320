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
import os
import os.path as osp
import sys

import torch

# The modules of this tool live next to it (tools/analysis/reproduction).
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))

from reproduction.configs import DEFAULT_TEACHER, ROOT  # noqa: E402
from reproduction.dense_configs import (  # noqa: E402
    SETTINGS,
    TASKS,
    ensure_data,
)
from reproduction.dense_plots import plot_dense  # noqa: E402
from reproduction.dense_records import read_dense_results  # noqa: E402
from reproduction.dense_report import markdown  # noqa: E402
from reproduction.dense_runner import dense_grid, run_dense_grid  # noqa: E402
from reproduction.report import teacher_line  # noqa: E402
from reproduction.runner import MissingTeacherError  # noqa: E402


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
        default=list(SETTINGS),
        choices=list(SETTINGS),
    )
    parser.add_argument('--seeds', nargs='+', type=int, default=[0])
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
    data.add_argument(
        '--items', type=int, nargs=2, default=[1, 3], metavar=('MIN', 'MAX')
    )
    data.add_argument(
        '--scale',
        type=float,
        nargs=2,
        default=[1.0, 1.6],
        metavar=('MIN', 'MAX'),
    )
    parser.add_argument(
        '--report',
        action='store_true',
        help='only summarise --out: Markdown tables and plot, no runs',
    )
    parser.add_argument('--out', default='results/dense_fashion_mnist.csv')
    parser.add_argument('--work-root', default='work_dirs/reproduce_dense')
    parser.add_argument(
        '--jobs',
        type=int,
        default=1,
        help='runs trained at once, each in its own worker process',
    )
    parser.add_argument(
        '--threads',
        type=int,
        default=None,
        help='torch CPU threads per run (default: the CPU count divided '
        'by --jobs)',
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
    results = read_dense_results(out)
    if not results:
        raise SystemExit(f'No results in {out}.')
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
    if args.jobs < 1:
        raise SystemExit(f'--jobs must be at least 1, got {args.jobs}.')
    # The configs' data and checkpoint paths are relative to the repository.
    args.out, args.work_root, args.data_root = (
        osp.abspath(p) for p in (args.out, args.work_root, args.data_root)
    )
    os.chdir(ROOT)
    if args.report:
        return report(args.out)
    if not osp.isfile(DEFAULT_TEACHER):
        raise MissingTeacherError(
            f'No teacher checkpoint at {DEFAULT_TEACHER} (the configs '
            'copy from and distill from it): see docs/reproduction.md.'
        )
    print(teacher_line(DEFAULT_TEACHER))
    args.threads = args.threads or max(1, os.cpu_count() // args.jobs)
    torch.set_num_threads(args.threads)
    ensure_data(
        args.data_root,
        args.canvas,
        args.train_images,
        args.test_images,
        args.items,
        args.scale,
    )
    done = {r.run.key() for r in read_dense_results(args.out)}
    runs = dense_grid(
        args.tasks,
        args.settings,
        args.seeds,
        args.canvas,
        args.train_images,
        args.epochs,
    )
    todo = [run for run in runs if run.key() not in done]
    print(
        f'{len(runs) - len(todo)} of {len(runs)} runs already in {args.out}; '
        f'{len(todo)} to run ({args.jobs} at a time, {args.threads} '
        'threads each).',
        flush=True,
    )
    run_dense_grid(
        todo,
        args.out,
        args.data_root,
        args.work_root,
        jobs=args.jobs,
        threads=args.threads,
    )
    return report(args.out)


if __name__ == '__main__':
    main()
