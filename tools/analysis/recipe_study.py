"""Conversion recipes side by side over seeds: the paper's one-stage
recipe against staged, hybrid and full-inheritance variants, on the
reproduction's Fashion-MNIST-5k target (docs/recipes.md).

Every arm (lab.reproduction.classification.recipes.ARMS) trains the
same total epochs from the same shipped softmax teacher with MLPCopy (or
its own setting) and attention-output distillation at lambda 50; a staged
arm splits the epochs between its stages. Each run trains in a fresh
worker process, so its peak resident memory is its own; each finished run
appends a row to the CSV (a re-run skips rows already there). At the end,
and alone with --report, the table (Markdown) and the plot are written
next to the CSV.

Example:
    python tools/analysis/recipe_study.py --seeds 0 1 2 --jobs 2
    python tools/analysis/recipe_study.py --operator gla --arms paper logit-kd
"""

import argparse
import os.path as osp
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab.benchmarks.options import add_subset_argument
from lab.reproduction.classification.cli import add_subset_options
from lab.reproduction.classification.configs import (
    limit_data,
    linear_operators,
)
from lab.reproduction.classification.recipe_report import (
    markdown,
    plot,
    summarise,
)
from lab.reproduction.classification.recipes import (
    ARMS,
    WARMUP_ITERS,
    arm_config,
    arm_operator,
    keep_softmax,
    stage_text,
)
from lab.reproduction.cli import add_output_options
from lab.reproduction.configs import DEFAULT_TEACHER
from lab.reproduction.records import append_row, read_rows
from lab.reproduction.runner import in_workers, train_then_test

COLUMNS = (
    'arm',
    'operator',
    'setting',
    'stages',
    'seed',
    'softmax_blocks',
    'block_scores',
    'top1',
    'wall_s',
    'peak_rss_mib',
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add_subset_argument(parser, '--arms', ARMS, 'arms to run')
    parser.add_argument(
        '--operator',
        default='relu',
        choices=list(linear_operators()),
        help='operator of the arms that do not name their own (relu)',
    )
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument(
        '--epochs', type=int, default=10, help='total epochs per run (10)'
    )
    parser.add_argument('--teacher', default=DEFAULT_TEACHER)
    parser.add_argument(
        '--warmup-iters',
        type=int,
        default=WARMUP_ITERS,
        help='distillation iterations before a hybrid chooses its block '
        '(%(default)s)',
    )
    parser.add_argument(
        '--report',
        action='store_true',
        help='only write the table and plot of --out, no runs',
    )
    add_output_options(parser, 'results/recipes.csv', 'work_dirs/recipes')
    add_subset_options(parser)
    return parser.parse_args(argv)


def train_arm(todo, operator, epochs, teacher, work_root, data, warmup):
    """Train and test one run, ``todo`` = (arm name, seed), in this
    process; returns its CSV row."""
    name, seed = todo
    arm = ARMS[name]
    torch.set_num_threads(1)
    work_dir = osp.join(work_root, f'{name}_{operator}_seed{seed}')
    cfg = arm_config(arm, operator, epochs, seed, teacher, work_dir)
    limit_data(cfg, *data)
    blocks, scores, select_s = [], '', 0.0
    if arm.hybrid:
        started = time.time()
        blocks, scores = keep_softmax(cfg, arm.hybrid, work_dir, warmup)
        select_s = time.time() - started
    _, metrics, train_s, test_s = train_then_test(cfg)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return dict(
        arm=name,
        operator=arm_operator(arm, operator),
        setting=arm.setting,
        stages=stage_text(cfg),
        seed=seed,
        softmax_blocks=' '.join(map(str, blocks)),
        block_scores=scores,
        top1=f'{float(metrics["accuracy/top1"]):.2f}',
        wall_s=f'{select_s + train_s + test_s:.1f}',
        peak_rss_mib=f'{peak_kib / 1024:.0f}',
    )


def report(out: str) -> str:
    """Write the Markdown table and the plot of the CSV ``out`` next to it;
    return the table."""
    table = summarise(read_rows(out))
    text = markdown(table)
    stem = osp.splitext(out)[0]
    with open(stem + '.md', 'w') as f:
        f.write(text)
    plot(table, stem + '.png')
    return text


def main(argv=None):
    args = parse_args(argv)
    if not args.report:
        done = {
            (r['arm'], r['operator'], r['seed']) for r in read_rows(args.out)
        }
        todo = [
            (arm, seed)
            for seed in args.seeds
            for arm in args.arms
            if (arm, arm_operator(ARMS[arm], args.operator), str(seed))
            not in done
        ]
        print(f'{len(todo)} runs to train ({len(done)} in {args.out}).')
        context = (
            args.operator,
            args.epochs,
            args.teacher,
            args.work_root,
            (args.train_indices, args.test_indices),
            args.warmup_iters,
        )
        started = time.time()
        runs = in_workers(train_arm, todo, context, args.jobs, fresh=True)
        for n, (_, row) in enumerate(runs, 1):
            append_row(args.out, row, COLUMNS)
            eta = (time.time() - started) / n * (len(todo) - n)
            print(
                f'[{n}/{len(todo)}] {row["arm"]} ({row["operator"]}) seed '
                f'{row["seed"]}: top-1 {row["top1"]}% in {row["wall_s"]} s; '
                f'ETA {eta / 60:.1f} min',
                flush=True,
            )
    print(report(args.out))


if __name__ == '__main__':
    main()
