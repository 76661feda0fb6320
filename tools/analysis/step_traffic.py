"""The bytes a ViT training step moves through memory, per image, without
a GPU: mmpretrain's softmax ViT against a linear ViT of every operator,
counted op by op (:mod:`lab.benchmarks.op_traffic`).

As in ``train_memory.py``, the operators with fused Triton kernels run
them under Triton's interpreter on the CPU (set here before Triton
imports), so the ops and launches counted are the GPU path's, and the
forward runs under autocast (``--dtype``). Four steps per model (one and
two blocks, one and two images) give the bytes per image and block and
per image outside the blocks; weight copies and weight gradients, the
same for any batch, are left out. The fused reductions split their
tokens as at ``--batch-size`` images
(:func:`lab.benchmarks.op_traffic.token_splits_as_at`). The table gives
the ops' bytes by phase, the fused kernels' (the distinct bytes each
launch loads and stores: see :mod:`lab.benchmarks.op_traffic` for what
that leaves out), the whole step of a ``--depth``-block ViT at
``--batch-size`` in GB and that over ``--bandwidth`` (a GPU's memory
bandwidth, GB/s): the time the step's traffic takes at least, most of it
elementwise work that a GPU runs at about that rate. A second table
lists each model's largest ops per image and block.

Example, at an H100's memory bandwidth::

    python tools/analysis/step_traffic.py --bandwidth 3350 \
        --out-dir work_dirs/step_traffic
"""

import os
import sys
from pathlib import Path

os.environ.setdefault('TRITON_INTERPRET', '1')  # before triton imports

import mmlvit  # noqa: E402, F401

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab import benchmarks as core  # noqa: E402
from lab.benchmarks import counted_step, op_traffic, tensor_memory  # noqa: E402
from lab.benchmarks.vit_models import SOFTMAX  # noqa: E402


def parse_args(argv=None):
    parser = counted_step.make_parser(
        'Bytes a ViT training step moves, per image'
    )
    parser.add_argument(
        '--batch-size',
        type=int,
        default=128,
        help='images of the whole-step figure (default: %(default)s)',
    )
    parser.add_argument(
        '--bandwidth',
        type=float,
        default=4800.0,
        help='memory bandwidth in GB/s for the time figure (default: '
        "%(default)s, an H200's peak)",
    )
    parser.add_argument(
        '--top', type=int, default=8, help='largest ops listed per model'
    )
    return counted_step.parse(parser, 'work_dirs/step_traffic', argv)


def figures_of(build, size, args):
    """Per image and block and outside the blocks: MiB by phase, by the
    kernels and in all, the largest ops of a block, and the whole step."""

    def measure(model, images, dtype):
        with op_traffic.token_splits_as_at(args.batch_size, len(images)):
            return op_traffic.step_traffic_mib(model, images, dtype)

    solved = tensor_memory.per_image_figures(
        build, size, args.autocast, measure=measure
    )
    block = {key: f['per_block'] for key, f in solved.items()}
    outside = {key: f['outside_blocks'] for key, f in solved.items()}
    per_block = op_traffic.totals(block)
    per_image = per_block['total'] * args.depth
    per_image += op_traffic.totals(outside)['total']
    step_gb = per_image * args.batch_size * tensor_memory.MIB / 1e9
    return dict(
        per_block=per_block,
        outside_blocks=op_traffic.totals(outside),
        largest=op_traffic.largest(block, args.top),
        step_gb=step_gb,
        step_ms=step_gb / args.bandwidth * 1e3,
    )


def describe(name, size, figures):
    """The line printed as a model's figures come."""
    totals = {k: round(v, 2) for k, v in figures['per_block'].items()}
    return f'{name} {size} px, MiB per image and block: {totals}'


def tables(results, args):
    """Markdown lines: the totals, then each model's largest ops."""
    header = ['model', 'path', 'px', 'ops forward', 'ops backward']
    header += ['kernels', 'per block', 'vs softmax', 'step GB', 'step ms']
    rows, largest = [], []
    for size in map(str, args.resolutions):
        ref = results[SOFTMAX][size]['per_block']['total']
        for name, by_size in results.items():
            f = by_size[size]
            b = f['per_block']
            rows.append(
                [name, f['path'], size]
                + [f'{b[k]:.2f}' for k in ('forward', 'backward', 'kernels')]
                + [f'{b["total"]:.2f}']
                + [f'{b["total"] / ref:.2f}x', f'{f["step_gb"]:.1f}']
                + [f'{f["step_ms"]:.1f}']
            )
            for phase, op, mib in f['largest']:
                largest.append([name, size, phase, op, f'{mib:.2f}'])
    lines = core.markdown_table(header, rows, '---' + ':' * 7)
    lines += ['', f'Largest ops per image and block (MiB, top {args.top}):']
    lines += ['']
    header = ['model', 'px', 'phase', 'op', 'MiB']
    return lines + core.markdown_table(header, largest, '----:')


def main(argv=None):
    args = parse_args(argv)
    heading = (
        f'arch {args.arch}, autocast {args.dtype}, MiB per image and block '
        "moved by PyTorch's ops (by phase) and by the Triton launches "
        f'(the distinct bytes each loads and stores); step: {args.depth} '
        f'blocks, batch {args.batch_size}, ms at {args.bandwidth:g} GB/s\n'
    )
    counted_step.run(
        args,
        lambda build, size: figures_of(build, size, args),
        describe,
        lambda results: [heading, *tables(results, args)],
    )


if __name__ == '__main__':
    main()
