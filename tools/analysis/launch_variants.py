"""The fused kernels' shipped launch options against the other choice of
each, timed side by side on a GPU (:mod:`lab.benchmarks.launch_variants`).

For each variant (``--variants``; default: all), each operator it changes
and each case (``--cases``, PX:BATCH: a ViT-B/16 block's attention at that
resolution and batch, N = (PX / 16)^2 + 1), one module and input: its
forward + backward with the shipped options and with the variant's, the
two taking turns (the median of ``--repeats`` calls each, timed by CUDA
events after one first call each, whose time holds the variant's
compilation), under ``--dtype`` autocast (bf16 by default). The outputs and
input gradients of the two are compared: launch options change the order
of a kernel's sums at most, so they agree to rounding.

On the CPU the kernels run only under Triton's interpreter, where warps
and stages change nothing: a check of the tool and of the variants, not a
timing (``TRITON_INTERPRET=1``, small ``--embed-dims``).

Writes variants.md and variants.json to ``--out-dir``.

Example::

    python tools/analysis/launch_variants.py --device cuda \\
        --out-dir work_dirs/launch_variants
"""

import argparse
import os.path as osp
import sys
from pathlib import Path

import torch
from mmengine.utils import mkdir_or_exist

import mmlvit  # noqa: F401  (registers the operators)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab import benchmarks as core
from lab.benchmarks.attention_steps import attention_step, token_grid
from lab.benchmarks.launch_variants import BY_NAME, VARIANTS
from lab.benchmarks.vit_models import interpreted_kernel_options
from mmlvit.ops.common.triton_runtime import interpreting

PATCH = 16  # ViT-B/16


def case(text):
    px, _, batch = text.partition(':')
    if not (px.isdigit() and batch.isdigit() and int(px) % PATCH == 0):
        raise argparse.ArgumentTypeError(
            f'{text!r}: PX:BATCH, PX a multiple of {PATCH} (e.g. 224:128)'
        )
    return int(px), int(batch)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    core.add_subset_argument(parser, '--variants', BY_NAME, 'the variants')
    core.add_operator_argument(parser)
    parser.add_argument(
        '--cases',
        nargs='+',
        type=case,
        default=[(224, 128), (1024, 8), (2048, 2)],
        help='PX:BATCH (default: 224:128 1024:8 2048:2)',
    )
    parser.add_argument('--embed-dims', type=int, default=768)
    parser.add_argument('--num-heads', type=int, default=12)
    core.add_timing_arguments(parser, repeats=5, budget_s=None)
    core.add_device_arguments(parser)
    core.add_out_dir_argument(parser, 'work_dirs/launch_variants')
    args = core.check_device_arguments(parser, parser.parse_args(argv))
    if args.device == 'cpu' and not interpreting():
        parser.error(
            "on the CPU the fused kernels run only under Triton's "
            'interpreter: set TRITON_INTERPRET=1 (a check of the tool, not '
            'a timing), or use --device cuda'
        )
    return args


def relative_difference(shipped, variant):
    """Largest |shipped - variant| over largest |shipped|, of the output
    and of the input gradient (the larger)."""
    return max(
        ((a.float() - b.float()).abs().max() / a.float().abs().max()).item()
        for a, b in zip(shipped, variant)
    )


def measure(variant, name, px, batch, args):
    """The variant against the shipped options for one case."""
    num_tokens = (px // PATCH) ** 2 + 1
    options = interpreted_kernel_options(name)  # {} on CUDA
    step, _ = attention_step(
        name, num_tokens, args.embed_dims, args.num_heads, args.device,
        args.dtype, batch=batch, options=options,
    )  # fmt: skip

    def variant_step():
        with variant.applied():
            return step()

    times = core.interleaved_times(
        dict(shipped=step, variant=variant_step), args.repeats, args.device
    )
    shipped_s = times['shipped']['median_s']
    variant_s = times['variant']['median_s']
    return dict(
        N=token_grid(name, num_tokens)[1],
        shipped_s=shipped_s,
        variant_s=variant_s,
        ratio=variant_s / shipped_s,
        variant_first_s=times['variant']['first_s'],
        difference=relative_difference(step(), variant_step()),
    )


def run(args, save):
    rows = []
    deadline = core.Deadline(args.max_seconds)
    for variant in (BY_NAME[v] for v in args.variants):
        for name in variant.operators:
            if args.operators and name not in args.operators:
                continue
            for px, batch in args.cases:
                row = dict(variant=variant.name, operator=name, px=px,
                           batch=batch)  # fmt: skip
                if deadline.expired():
                    result = dict(skipped='--max-seconds reached')
                else:
                    result = core.run_case(
                        measure, variant, name, px, batch, args,
                        device=args.device,
                    )  # fmt: skip
                row.update(result, status=core.status(result))
                rows.append(row)
                print(row, flush=True)
                save(rows)
    return rows


def render(args, rows):
    ms = lambda seconds: f'{1e3 * seconds:.2f}'  # noqa: E731
    columns = [
        ('variant', 'variant', '{}', '-'),
        ('operator', 'operator', '{}', '-'),
        ('px', 'px', '{}'),
        ('batch', 'batch', '{}'),
        ('shipped (ms)', 'shipped_s', ms),
        ('variant (ms)', 'variant_s', ms),
        ('variant / shipped', 'ratio', '{:.3f}'),
        ('variant first call (s)', 'variant_first_s', '{:.1f}'),
        ('max rel. difference', 'difference', '{:.1e}'),
    ]
    lines = [
        f'{core.describe_device(args.device, args.dtype)}; attention '
        f'module alone, C={args.embed_dims}, {args.num_heads} heads, '
        f'forward + backward, median of {args.repeats} calls each, the '
        'shipped options and the variant taking turns. Below 1: the '
        'variant is faster.',
        '',
        *core.column_table(columns, rows, keys=4),
        '',
    ]
    for variant in VARIANTS:
        mine = [r for r in rows if r['variant'] == variant.name]
        if mine:
            lines.append(f'- {variant.name}: {variant.what}.')
    return lines


def main(argv=None):
    args = parse_args(argv)
    mkdir_or_exist(args.out_dir)
    json_path = osp.join(args.out_dir, 'variants.json')

    def save(rows):
        core.write_json(json_path, dict(device=args.device, rows=rows))

    if args.threads:
        torch.set_num_threads(args.threads)
    rows = run(args, save)
    lines = render(args, rows)
    with open(osp.join(args.out_dir, 'variants.md'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))
    return 0


if __name__ == '__main__':
    sys.exit(main())
