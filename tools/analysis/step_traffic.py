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

Example::

    python tools/analysis/step_traffic.py --out-dir work_dirs/step_traffic
"""

import os
import sys
from pathlib import Path

os.environ.setdefault('TRITON_INTERPRET', '1')  # before triton imports

import argparse  # noqa: E402
import os.path as osp  # noqa: E402

import torch  # noqa: E402
from mmengine.utils import mkdir_or_exist  # noqa: E402

import mmlvit  # noqa: E402, F401

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab import benchmarks as core  # noqa: E402
from lab.benchmarks import op_traffic, tensor_memory  # noqa: E402
from lab.benchmarks.vit_models import (  # noqa: E402
    SOFTMAX,
    counted_models,
    depth_builder,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Bytes a ViT training step moves, per image, softmax '
        "vs every linear operator (the fused kernels' path under Triton's "
        'interpreter; no GPU needed).',
    )
    core.add_counted_step_arguments(parser)
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
    core.add_out_dir_argument(
        parser, 'work_dirs/step_traffic', 'table.md and results.json'
    )
    return core.resolve_counted_step(parser.parse_args(argv))


def figures_of(name, size, args):
    """Per image and block and outside the blocks: MiB by phase, by the
    kernels and in all, the largest ops of a block, and the whole step."""
    build = depth_builder(name, args.arch, size)

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


def measure(args):
    """{model: {size: figures}}, printing each as it comes."""
    results = {}
    for name, path in counted_models(args.operators):
        for size in args.resolutions:
            figures = figures_of(name, size, args)
            figures['path'] = path
            results.setdefault(name, {})[str(size)] = figures
            totals = {k: round(v, 2) for k, v in figures['per_block'].items()}
            print(f'{name} {size} px, MiB per image and block: {totals}')
    return results


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
    torch.set_num_threads(1)
    mkdir_or_exist(args.out_dir)
    results = measure(args)
    core.write_json(osp.join(args.out_dir, 'results.json'), results)
    lines = tables(results, args)
    lines.insert(
        0,
        f'arch {args.arch}, autocast {args.dtype}, MiB per image and block '
        "moved by PyTorch's ops (by phase) and by the Triton launches "
        f'(the distinct bytes each loads and stores); step: {args.depth} '
        f'blocks, batch {args.batch_size}, ms at {args.bandwidth:g} GB/s\n',
    )
    core.write_table(osp.join(args.out_dir, 'table.md'), '\n'.join(lines), [])


if __name__ == '__main__':
    main()
