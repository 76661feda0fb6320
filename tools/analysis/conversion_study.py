"""Two questions about MLPCopy + distill, measured over seeds: does
choosing a hybrid's softmax block by measurement beat a fixed choice, and
does conversion-aware optimisation help?

On the reproduction's Fashion-MNIST-5k target (docs/reproduction.md: tiny
ViT, shipped softmax teacher, 10 epochs, MLPCopy + attention-output
distillation at lambda 50), per seed:

- ``linear``: every block linear (the reproduction's MLPCopy + distill run);
- ``measured``: K blocks kept softmax, chosen by choose_hybrid's measurement
  (distillation warm-up, per-block attention-output error on training
  batches, in the student's own forward) for this seed;
- ``measured-local``: the same, ranked by the error on the teacher's input;
- ``first`` / ``last``: the first / last K blocks kept softmax (softmax
  blocks start from the teacher's attention weights);
- ``fresh-lr``: ``linear`` with the fresh parameters' learning rate times
  --fresh-lr-mult (ConversionAwareOptimWrapperConstructor);
- ``freeze``: ``linear`` with the copied parameters frozen for the first
  --freeze-iters iterations (FreezeCopiedHook);
- ``all-lr``: ``linear`` with every learning rate times --fresh-lr-mult (the
  control for ``fresh-lr``: is it the fresh parameters or the rate?);
- ``softmax``: the teacher fine-tuned (the reproduction's softmax run).

Each finished run appends a row to the CSV (a re-run skips rows already
there); the summary (mean and std over seeds) is printed at the end.

Example:
    python tools/analysis/conversion_study.py --operator relu \\
        --seeds 0 1 2 --jobs 2 --out results/conversion_study.csv
"""

import argparse
import os.path as osp
import statistics
import sys
import time
from pathlib import Path

import torch

from mmlvit.models.losses import PAPER_DISTILL_WEIGHT

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab.reproduction.classification.cli import add_subset_options
from lab.reproduction.classification.configs import limit_data, run_config
from lab.reproduction.classification.records import Run
from lab.reproduction.cli import add_output_options
from lab.reproduction.configs import (
    DEFAULT_TEACHER,
    SOFTMAX,
)
from lab.reproduction.records import append_row, read_rows
from lab.reproduction.runner import in_workers, train_then_test

VARIANTS = (
    'linear',
    'measured',
    'measured-local',
    'first',
    'last',
    'fresh-lr',
    'freeze',
    'all-lr',
    'softmax',
)
FIELDS = (
    'variant',
    'operator',
    'keep_softmax',
    'seed',
    'softmax_blocks',
    'block_errors',
    'top1',
    'wall_s',
)
DATASET, EPOCHS = 'fashion-mnist-5k', 10


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--operator', default='relu', help='short name')
    parser.add_argument(
        '--variants',
        nargs='+',
        default=VARIANTS,
        help='variants to run (default: all of them)',
    )
    parser.add_argument(
        '--seeds',
        type=int,
        nargs='+',
        default=[0, 1, 2],
        help='(default: 0 1 2)',
    )
    parser.add_argument(
        '--keep-softmax',
        type=int,
        default=1,
        metavar='K',
        help='blocks kept softmax by the hybrid variants (1)',
    )
    parser.add_argument(
        '--warmup-iters',
        type=int,
        default=100,
        help='distillation iterations before measuring the blocks (100)',
    )
    parser.add_argument(
        '--teacher',
        default=DEFAULT_TEACHER,
        help='softmax teacher checkpoint (default: the shipped one)',
    )
    parser.add_argument(
        '--fresh-lr-mult',
        type=float,
        default=3.0,
        help='learning-rate multiplier of fresh-lr and all-lr (3)',
    )
    parser.add_argument(
        '--freeze-iters',
        type=int,
        default=79,
        help='iterations with copied parameters frozen (79: one epoch)',
    )
    parser.add_argument(
        '--epochs', type=int, default=EPOCHS, help='training epochs (10)'
    )
    add_output_options(
        parser, 'results/conversion_study.csv', 'work_dirs/conversion_study'
    )
    add_subset_options(parser)
    return parser.parse_args(argv)


def train_variant(
    todo, operator, k, warmup_iters, teacher, root, epochs, data, opt
):
    """Train and test one run, ``todo`` = (variant, seed); returns its CSV
    row. ``data`` is (train_indices, test_indices) (None: all), ``opt``
    (fresh-lr multiplier, freeze iterations)."""
    from mmlvit.diagnostics.hybrid import make_hybrid, measure_blocks

    variant, seed = todo
    torch.set_num_threads(1)
    name = f'{variant}_{operator}_k{k}_seed{seed}'
    work_dir = osp.join(root, name)
    if variant == SOFTMAX:
        run = Run(DATASET, SOFTMAX, SOFTMAX, False, 0.0, epochs, seed)
    else:
        run = Run(
            DATASET,
            operator,
            'mlpcopy',
            True,
            PAPER_DISTILL_WEIGHT,
            epochs,
            seed,
        )
    cfg = run_config(run, teacher, work_dir)
    limit_data(cfg, *data)
    depth = (
        cfg.model.student.backbone.arch['num_layers']
        if variant != SOFTMAX
        else None
    )
    blocks, errors = [], ''
    if variant.startswith('measured'):
        metric = 'attn_rel_err' + (
            '_local' if variant.endswith('local') else ''
        )
        diagnosis = measure_blocks(
            cfg, warmup_iters, osp.join(work_dir, 'warmup')
        )
        blocks = sorted(diagnosis.worst_blocks(k, metric))
        errors = ' '.join(f'{row[metric]:.4f}' for row in diagnosis.blocks)
    elif variant == 'first':
        blocks = list(range(k))
    elif variant == 'last':
        blocks = list(range(depth - k, depth))
    if blocks:
        make_hybrid(cfg, blocks)
    if variant in ('fresh-lr', 'freeze'):
        fresh_lr_mult, freeze_iters = opt
        cfg.optim_wrapper.constructor = (
            'ConversionAwareOptimWrapperConstructor'
        )
        cfg.optim_wrapper.paramwise_cfg.update(
            fresh_lr_mult=fresh_lr_mult if variant == 'fresh-lr' else 1.0,
        )
        if variant == 'freeze':
            cfg.custom_hooks.append(
                dict(type='FreezeCopiedHook', iters=freeze_iters)
            )
    if variant == 'all-lr':
        cfg.optim_wrapper.optimizer.lr *= opt[0]
    _, metrics, train_s, test_s = train_then_test(cfg)
    return dict(
        variant=variant,
        operator=operator if variant != SOFTMAX else SOFTMAX,
        keep_softmax=len(blocks) if variant != SOFTMAX else 'all',
        seed=seed,
        softmax_blocks=' '.join(map(str, blocks)),
        block_errors=errors,
        top1=f'{float(metrics["accuracy/top1"]):.2f}',
        wall_s=f'{train_s + test_s:.1f}',
    )


def summary(rows):
    """Lines 'variant: mean +- std (n seeds)' in VARIANTS order."""
    lines = []
    for variant in VARIANTS:
        top1 = [float(r['top1']) for r in rows if r['variant'] == variant]
        if not top1:
            continue
        std = statistics.stdev(top1) if len(top1) > 1 else 0.0
        blocks = sorted(
            {r['softmax_blocks'] for r in rows if r['variant'] == variant}
        )
        lines.append(
            f'{variant:>9}: {statistics.mean(top1):.2f} +- {std:.2f} '
            f'({len(top1)} seeds; softmax blocks: '
            f'{", ".join(b or "none" for b in blocks)})'
        )
    return lines


def main(argv=None):
    args = parse_args(argv)
    done = {(r['variant'], r['seed']) for r in read_rows(args.out)}
    todo = [
        (variant, seed)
        for seed in args.seeds
        for variant in args.variants
        if (variant, str(seed)) not in done
    ]
    print(f'{len(todo)} runs to train ({len(done)} already in {args.out}).')
    context = (
        args.operator,
        args.keep_softmax,
        args.warmup_iters,
        args.teacher,
        args.work_root,
        args.epochs,
        (args.train_indices, args.test_indices),
        (args.fresh_lr_mult, args.freeze_iters),
    )
    started = time.time()
    done = in_workers(train_variant, todo, context, args.jobs)
    for n, (_, row) in enumerate(done):
        append_row(args.out, row, FIELDS)
        eta = (time.time() - started) / (n + 1) * (len(todo) - n - 1)
        print(
            f'[{n + 1}/{len(todo)}] {row["variant"]} seed {row["seed"]}: '
            f'top-1 {row["top1"]}% (softmax blocks: '
            f'{row["softmax_blocks"] or "none"}); ETA {eta / 60:.1f} min',
            flush=True,
        )
    print('\n'.join(summary(read_rows(args.out))))


if __name__ == '__main__':
    main()
