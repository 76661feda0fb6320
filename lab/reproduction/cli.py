"""What every grid's command line shares: the options that say where the
results go and how many runs train at once, entering the repository, and
training the runs of a grid that its CSV does not hold yet."""

import os
import os.path as osp

from .configs import ROOT
from .records import read_results
from .runner import run_grid


def add_output_options(parser, out: str, work_root: str) -> None:
    """``--out`` (the CSV, default ``out``), ``--work-root`` (the runs'
    work directories, default ``work_root``) and ``--jobs``."""
    parser.add_argument(
        '--out', default=out, help='results CSV (default: %(default)s)'
    )
    parser.add_argument(
        '--work-root',
        default=work_root,
        help="parent of the runs' work directories (default: %(default)s)",
    )
    parser.add_argument(
        '--jobs',
        type=int,
        default=1,
        help='runs trained at once, each in its own worker process',
    )


def add_grid_options(parser, out: str, work_root: str) -> None:
    """``--seeds``, ``--report``, the :func:`add_output_options` and
    ``--threads``."""
    parser.add_argument('--seeds', nargs='+', type=int, default=[0])
    parser.add_argument(
        '--report',
        action='store_true',
        help='only summarise --out: Markdown tables and plot, no runs',
    )
    add_output_options(parser, out, work_root)
    parser.add_argument(
        '--threads',
        type=int,
        default=None,
        help='torch CPU threads per run (default: the CPU count divided '
        'by --jobs)',
    )


def enter_repository(args, *paths: str) -> None:
    """Check ``--jobs``, make the options named by ``paths`` absolute and
    change to the repository (the configs' data and checkpoint paths are
    relative to it).

    Raises:
        SystemExit: ``--jobs`` is below 1.
    """
    if args.jobs < 1:
        raise SystemExit(f'--jobs must be at least 1, got {args.jobs}.')
    for name in paths:
        setattr(args, name, osp.abspath(getattr(args, name)))
    os.chdir(ROOT)


def set_threads(args) -> None:
    """Torch's CPU threads in this process: ``--threads``, by default the
    CPU count divided by ``--jobs``."""
    import torch

    args.threads = args.threads or max(1, os.cpu_count() // args.jobs)
    torch.set_num_threads(args.threads)


def results_to_report(out: str, result_type: type) -> list:
    """The results in the CSV ``out`` (read as ``result_type``).

    Raises:
        SystemExit: The CSV holds none (or does not exist).
    """
    results = read_results(out, result_type)
    if not results:
        raise SystemExit(f'No results in {out}.')
    return results


def run_missing(args, runs, result_type, train_and_test, context) -> None:
    """Train and test the runs of ``runs`` whose key the CSV ``args.out``
    does not hold (read as ``result_type``), ``args.jobs`` at a time with
    ``train_and_test(run, *context)``, after a line saying how many are
    already there."""
    done = {r.run.key() for r in read_results(args.out, result_type)}
    todo = [run for run in runs if run.key() not in done]
    print(
        f'{len(runs) - len(todo)} of {len(runs)} runs already in {args.out}; '
        f'{len(todo)} to run ({args.jobs} at a time, {args.threads} '
        'threads each).',
        flush=True,
    )
    run_grid(todo, args.out, train_and_test, context, args.jobs, args.threads)
