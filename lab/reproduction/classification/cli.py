"""Small-scale reproduction of the paper's result matrix (Qin et al.,
arXiv:2609.35745; set-up and results in docs/reproduction.md).

Students (the tiny ViT's shapes with a linear operator) start from the tiny
softmax teacher pre-trained on Fashion-MNIST under one of the paper's
initialisation settings, with or without attention-output distillation, and
are trained and evaluated on a target: the Fashion-MNIST 5k subset (tested
on the 10k test split) or MNIST-5k (4k/1k). Every run is a real mmengine
Runner built from the configs under configs/fashion_mnist and
configs/_base_.

Each finished run appends one row to the CSV; a re-run of the same command
skips the rows already there, so a half-finished grid resumes. Runs go seed
by seed (every configuration of seed 0 first), and ``--jobs N`` trains N runs
at once in worker processes of ``--threads`` threads each. A plot is written
next to the CSV: bars in the style of the paper's Fig. 4 (per setting, the
distillation gain stacked, the softmax reference dashed, the std over seeds
as error bars), or top-1 against lambda / epochs when the grid sweeps those.

The operators are the registered linear ones (``registered_operators()``,
by ``short_name``), the settings those of ``mmlvit.transfer.SETTINGS`` (by
``short_name``) plus ``softmax``: the softmax teacher itself, fine-tuned.

Examples:
    # the paper's grid for two operators, 3 seeds, on Fashion-MNIST-5k
    python tools/analysis/reproduce.py --operators relu gla \\
        --settings random attncopy mlpcopy fullcopy softmax --distill both \\
        --seeds 0 1 2 --out results/fashion_mnist.csv
    # a lambda sweep for MLPCopy + distill
    python tools/analysis/reproduce.py --operators relu \\
        --settings mlpcopy+distill --lambdas 5 10 30 50 100 \\
        --out results/lambda.csv
    # only train the teacher (kept at --teacher)
    python tools/analysis/reproduce.py --teacher-only --teacher new.pth

The teacher is the file at ``--teacher`` (by default the one shipped in
checkpoints/); when it is missing the tool stops, unless ``--train-teacher``
(or ``--teacher-only``) asks to train one there. Every grid prints the
teacher's test accuracy recorded in its checkpoint.

A setting named ``NAME+distill`` is that setting with distillation only,
whatever ``--distill`` says (e.g. ``--settings random mlpcopy+distill``).

A setting may also be a component spec (``mmlvit.transfer.specs``): a
setting's short name with ``+TERM`` / ``-TERM`` terms, a term a component
or a group (``embeddings``, ``attn``, ``norms``: every LayerNorm), e.g.
``mlpcopy+norms``, ``fullcopy-attn``, ``fullcopy-attn+distill``. Every row
records the components its run copied (column ``components``). A CSV
holding specs is reported as a component grid
(:mod:`.component_report`): per target and operator each setting's gain
over Random and share of FullCopy's, the verdicts on the paper's two
component claims, a Markdown file and a plot next to the CSV::

    # the leave-one-out grid (docs/reproduction.md)
    python tools/analysis/reproduce.py --operators relu gla --distill off \
        --settings random mlpcopy mlpcopy+norms mlpcopy+embeddings \
        fullcopy-attn fullcopy-mlp fullcopy fullcopy-attn+distill \
        fullcopy+distill --seeds 0 1 2 --out results/components.csv
"""

import argparse
import os.path as osp

from mmlvit.models.losses import PAPER_DISTILL_WEIGHT
from mmlvit.transfer import TransferError, spec_policy

from ..cli import (
    add_grid_options,
    enter_repository,
    results_to_report,
    run_missing,
    set_threads,
)
from ..configs import (
    DEFAULT_TEACHER,
    DISTILL_SUFFIX,
    SOFTMAX,
    grid_settings,
    split_setting,
)
from ..records import read_results
from ..summary import teacher_line
from . import component_report, runner
from .configs import TARGETS, linear_operators
from .plots import plot_results
from .records import RunResult
from .report import print_markdown, print_table


def setting_choices():
    """``--settings`` entries: every setting's short name, ``softmax``, and
    ``NAME+distill`` for every setting."""
    names = list(grid_settings())
    return [*names, SOFTMAX, *(s + DISTILL_SUFFIX for s in names)]


def setting_entry(entry: str) -> str:
    """A ``--settings`` entry, checked: ``softmax``, a setting's short name
    or a component spec, optionally with ``+distill`` last.

    Raises:
        argparse.ArgumentTypeError: It names none (the message says why and
            what to choose from).
    """
    setting, _ = split_setting(entry)
    if setting == SOFTMAX:
        if entry != SOFTMAX:
            raise argparse.ArgumentTypeError(
                f'{entry!r}: the softmax reference is never distilled; '
                'write softmax.'
            )
        return entry
    try:
        spec_policy(setting)
    except TransferError as err:
        hint = ''
        if DISTILL_SUFFIX in setting:
            hint = f' ({DISTILL_SUFFIX} goes at the end.)'
        raise argparse.ArgumentTypeError(f'{err}{hint}') from err
    return entry


def add_subset_options(parser) -> None:
    """``--train-indices N`` / ``--test-indices N``: train / test on only
    the first N images of the splits (quick checks)."""
    parser.add_argument(
        '--train-indices',
        type=int,
        default=None,
        help='train on only the first N target images (quick checks)',
    )
    parser.add_argument(
        '--test-indices',
        type=int,
        default=None,
        help='test on only the first N test images',
    )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Run a grid of small-scale copy/distill experiments.'
    )
    parser.add_argument(
        '--operators',
        nargs='+',
        default=['gla'],
        choices=list(linear_operators()),
        help='linear operators (the short names of the registered ones)',
    )
    parser.add_argument(
        '--settings',
        nargs='+',
        default=['random', 'mlpcopy'],
        type=setting_entry,
        metavar='SETTING',
        help=f'settings: {", ".join(setting_choices())}, or a component '
        "spec such as mlpcopy+norms or fullcopy-attn; 'NAME+distill' runs "
        'NAME with distillation only',
    )
    parser.add_argument(
        '--distill', choices=['off', 'on', 'both'], default='both'
    )
    parser.add_argument(
        '--lambdas', nargs='+', type=float, default=[PAPER_DISTILL_WEIGHT]
    )
    parser.add_argument('--epochs', nargs='+', type=int, default=[10])
    parser.add_argument(
        '--targets',
        nargs='+',
        default=['fashion-mnist-5k'],
        choices=list(TARGETS),
    )
    parser.add_argument(
        '--teacher',
        default=DEFAULT_TEACHER,
        help='softmax teacher checkpoint (default: the shipped one); a '
        'missing file is an error unless --train-teacher is given',
    )
    parser.add_argument(
        '--train-teacher',
        action='store_true',
        help='if --teacher does not exist, train a teacher with the teacher '
        'config and save it there',
    )
    add_subset_options(parser)
    parser.add_argument(
        '--reuse',
        nargs='+',
        default=[],
        metavar='CSV',
        help="copy the results of this grid's runs that these CSVs hold "
        '(same target, operator, setting, distillation, lambda, epochs and '
        'seed; full data, shipped teacher) into --out instead of training '
        'them again',
    )
    parser.add_argument(
        '--teacher-only',
        action='store_true',
        help='train the teacher if --teacher does not exist (implies '
        '--train-teacher), print its accuracy and stop',
    )
    add_grid_options(parser, 'results/reproduce.csv', 'work_dirs/reproduce')
    return parser.parse_args(argv)


def grid_runs(args) -> list:
    """The runs the parsed command line asks for (``runner.grid``)."""
    return runner.grid(
        args.operators,
        args.settings,
        args.distill,
        args.lambdas,
        args.epochs,
        args.seeds,
        args.targets,
    )


def main(argv=None):
    """Run the grid (or only report on ``--out``); return the results in
    the CSV (a list of ``RunResult``)."""
    args = parse_args(argv)
    runner.check_reusable(args)
    args.reuse = [osp.abspath(path) for path in args.reuse]
    enter_repository(args, 'out', 'work_root', 'teacher')
    figure = osp.splitext(args.out)[0] + '.png'
    if args.report:
        results = results_to_report(args.out, RunResult)
        if component_report.is_component_grid(results):
            report_components(results, args.out)
        else:
            print_markdown(results)
            plot_results(results, figure)
        return results
    set_threads(args)
    teacher = runner.ensure_teacher(
        args.teacher,
        args.work_root,
        args.train_teacher or args.teacher_only,
        args.train_indices,
        args.test_indices,
    )
    print(teacher_line(teacher))
    if args.teacher_only:
        return []
    runs = grid_runs(args)
    if args.reuse:
        copied = runner.reuse_results(args.reuse, runs, args.out)
        print(f'{copied} results copied from {", ".join(args.reuse)}.')
    context = (teacher, args.work_root, args.train_indices, args.test_indices)
    run_missing(args, runs, RunResult, runner.train_and_test, context)
    results = read_results(args.out, RunResult)
    print_table(results)
    print(teacher_line(teacher))
    if component_report.is_component_grid(results):
        report_components(results, args.out)
        return results
    plot_results(results, figure)
    print(f'Results: {args.out}, plot: {figure}')
    return results


def report_components(results, out: str) -> None:
    """Print the component grid's report and write it (Markdown) and its
    plot next to the CSV ``out``."""
    stem = osp.splitext(out)[0]
    text = component_report.markdown(results, osp.basename(out))
    with open(stem + '.md', 'w') as f:
        f.write(text)
    component_report.plot(results, stem + '.png')
    print(text)
    print(f'Results: {out}, report: {stem}.md, plot: {stem}.png')
