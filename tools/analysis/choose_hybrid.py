"""Write a hybrid student config whose K hardest blocks keep softmax
attention, chosen by measurement.

From a distillation config (AttentionDistiller: linear student, softmax
teacher checkpoint): distil for --warmup-iters iterations, measure every
block's conversion error on training batches (mmlvit.diagnostics), and
write a config that inherits CONFIG, keeps the --keep-softmax blocks with
the largest error (default metric: the attention-output error in the
student's own forward, which the distillation minimises; the "local" error
on the teacher's input only means something when the student shares the
teacher's token representation, e.g. after FullCopy) as SoftmaxAttention
with the teacher's attention weights, and records how they were chosen
(hybrid_selection). With --blocks the blocks are given instead of measured
(fixed baselines).

Examples:
    python tools/analysis/choose_hybrid.py \\
        configs/fashion_mnist/vit-tiny-p4_gla_copy-distill_fashion-mnist-5k.py\\
        --keep-softmax 1 --warmup-iters 100 --out work_dirs/hybrid/k1.py
    python tools/train.py work_dirs/hybrid/k1.py
"""

import argparse
import os.path as osp

from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import set_random_seed

import mmlvit  # noqa: F401  (registers the modules, safe loading)
from mmlvit.diagnostics import BLOCK_METRICS
from mmlvit.diagnostics.hybrid import (
    measure_blocks,
    warm_up,
    write_hybrid_config,
)
from mmlvit.diagnostics.kl_selection import greedy_kl_blocks
from mmlvit.utils.cli import add_cfg_options


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('config', help='distillation config (linear student)')
    parser.add_argument('--out', required=True, help='hybrid config to write')
    parser.add_argument(
        '--teacher', help="teacher checkpoint (default: the config's)"
    )
    parser.add_argument(
        '--keep-softmax',
        type=int,
        default=1,
        metavar='K',
        help='blocks that keep softmax attention (1)',
    )
    parser.add_argument(
        '--blocks',
        type=int,
        nargs='+',
        help='keep these blocks softmax instead of measuring',
    )
    parser.add_argument(
        '--warmup-iters',
        type=int,
        default=100,
        help='distillation iterations before measuring (100)',
    )
    parser.add_argument(
        '--batches', type=int, default=4, help='training batches measured (4)'
    )
    parser.add_argument(
        '--criterion',
        default='block-error',
        choices=['block-error', 'logit-kl'],
        help='block-error: the K blocks with the largest --metric; logit-kl: '
        'greedily the block whose softmax attention brings the logits '
        'closest to the teacher (mean KL), K times (default: %(default)s)',
    )
    parser.add_argument(
        '--metric',
        default='attn_rel_err',
        choices=[m for m in BLOCK_METRICS if m != 'block_cos'],
        help='error that ranks the blocks (largest first)',
    )
    parser.add_argument(
        '--work-dir', help='log folder of the warm-up (default: next to --out)'
    )
    parser.add_argument('--seed', type=int, default=0)
    add_cfg_options(
        parser, 'override config entries of the warm-up and the written config'
    )
    return parser.parse_args(argv)


def by_block_error(cfg, args, work_dir):
    """The K blocks with the largest conversion error after a warm-up."""
    diagnosis = measure_blocks(cfg, args.warmup_iters, work_dir, args.batches)
    blocks = sorted(diagnosis.worst_blocks(args.keep_softmax, args.metric))
    errors = {
        row['block']: round(row[args.metric], 5) for row in diagnosis.blocks
    }
    print('block errors (' + args.metric + '):')
    for block, error in errors.items():
        mark = '  <- softmax' if block in blocks else ''
        print(f'  block {block}: {error:.4f}{mark}')
    return blocks, dict(method='measured', metric=args.metric, errors=errors)


def by_logit_kl(cfg, args, work_dir):
    """K blocks chosen greedily by the logits' KL after a warm-up."""
    distiller, images = warm_up(cfg, args.warmup_iters, work_dir, args.batches)
    order, steps = greedy_kl_blocks(
        distiller.teacher, distiller.student, images, args.keep_softmax
    )
    print('KL(teacher || hybrid) of the logits, block by block:')
    for step in steps:
        kl = {b: round(v, 5) for b, v in step['kl'].items()}
        print(f"  step {step['step']}: from {step['kl_before']:.4f}, "
              f"{kl} -> block {step['chosen']}")  # fmt: skip
    record = [
        dict(kl={b: round(v, 5) for b, v in s['kl'].items()},
             kl_before=round(s['kl_before'], 5), chosen=s['chosen'])
        for s in steps
    ]  # fmt: skip
    return sorted(order), dict(
        method='measured', criterion='logit-kl', order=order, steps=record
    )


def main(argv=None):
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    if args.teacher:
        cfg.model.teacher_checkpoint = args.teacher
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    if args.blocks is not None:
        blocks = sorted(set(args.blocks))
        selection = dict(method='given', blocks=blocks)
    else:
        set_random_seed(args.seed)
        cfg.randomness = dict(seed=args.seed)
        work_dir = args.work_dir or osp.splitext(args.out)[0] + '_warmup'
        measure = (
            by_logit_kl if args.criterion == 'logit-kl' else by_block_error
        )
        blocks, selection = measure(cfg, args, work_dir)
        selection.update(
            warmup_iters=args.warmup_iters,
            batches=args.batches,
            seed=args.seed,
            teacher=cfg.model.teacher_checkpoint,
            blocks=blocks,
        )
    if args.cfg_options:
        selection['cfg_options'] = dict(args.cfg_options)
    write_hybrid_config(args.out, args.config, cfg, blocks, selection)
    print(f'Wrote {args.out}: blocks {blocks} keep softmax attention.')
    return blocks


if __name__ == '__main__':
    main()
