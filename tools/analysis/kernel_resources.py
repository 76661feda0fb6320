"""Registers, spills and resident warps of every fused Triton kernel of the
project at its shipped launch configuration, without a GPU.

Each kernel is compiled by Triton's compiler and the ptxas it ships for an
sm_90 (H100 / H200) multiprocessor (``--arch``), for ViT-B heads (d = 64,
``--head-width``; 768 channels) in bf16 (``--dtype``), with the tile
sizes, precision, warps and ptxas options its launch code gives it on
that architecture (read from the launch objects themselves;
:mod:`lab.benchmarks.kernel_resources`). A kernel
that spills keeps values in local memory (a round trip through the caches
each time); ``resident warps`` is how many of its warps one
multiprocessor's registers and shared memory hold at once, 0 for a kernel
that needs more shared memory than one program may have (it cannot
launch there). ``--num-warps`` compiles other warp counts beside the
shipped one, to compare.

Example::

    python tools/analysis/kernel_resources.py --out-dir work_dirs/kernels
"""

import argparse
import os.path as osp
import sys
from pathlib import Path

import triton
from mmengine.utils import mkdir_or_exist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab import benchmarks as core
from lab.benchmarks.kernel_cases import FAMILIES
from lab.benchmarks.kernel_resources import (
    MULTIPROCESSORS,
    OPCODES,
    kernel_resources,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Registers, spills and resident warps of the project's "
        'Triton kernels, compiled without a GPU.'
    )
    core.add_subset_argument(parser, '--families', FAMILIES, 'kernel families')
    parser.add_argument(
        '--num-warps',
        nargs='+',
        type=int,
        default=[],
        help='also compile with these warp counts (the shipped one always)',
    )
    parser.add_argument(
        '--dtype',
        choices=tuple(core.DTYPES),
        default='bf16',
        help='dtype of the tokens (autocast); default: %(default)s',
    )
    parser.add_argument(
        '--arch',
        type=int,
        choices=tuple(MULTIPROCESSORS),
        default=90,
        help='compile for sm_ARCH (default: %(default)s)',
    )
    parser.add_argument(
        '--head-width',
        type=int,
        default=64,
        help='channels per head (default: %(default)s, as in ViT-B)',
    )
    parser.add_argument(
        '--loops',
        action='store_true',
        help='also count the instructions of every loop of the machine '
        'code (loops.md; a body times its trip count is what a warp runs) '
        'and the 1- or 2-byte global loads and stores',
    )
    core.add_out_dir_argument(
        parser, 'work_dirs/kernel_resources', 'table.md and results.json'
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    mkdir_or_exist(args.out_dir)
    rows, results = [], []
    dtype = core.DTYPES[args.dtype]
    for family in args.families:
        cases = FAMILIES[family](dtype, args.dtype, args.head_width, args.arch)
        for case in cases:
            shipped = case.num_warps
            for warps in sorted({shipped, *args.num_warps}):
                case.num_warps = warps
                used = kernel_resources(case, args.arch, args.loops)
                results.append(
                    dict(
                        kernel=case.name,
                        num_warps=warps,
                        shipped=warps == shipped,
                        **used,
                    )
                )
                resident = used['resident_warps']
                rows.append(
                    [
                        case.name,
                        f'{warps}' + (' (shipped)' * (warps == shipped)),
                    ]
                    + [str(used[k]) for k in ('registers', 'spill_bytes')]
                    + [str(used['shared_bytes']), str(resident)]
                    + [str(resident // warps), f'{used["compile_s"]:.1f}']
                )
                print(' | '.join(rows[-1]), flush=True)
    header = ['kernel', 'warps', 'registers', 'spill bytes', 'shared bytes']
    header += ['resident warps', 'resident programs', 'compile s']
    lines = core.markdown_table(header, rows, '--' + ':' * 6)
    shipped = sum(r['compile_s'] for r in results if r['shipped'])
    lines.insert(
        0,
        f'sm_{args.arch}, Triton {triton.__version__}, {args.dtype}, '
        f'head width {args.head_width}, per thread; 0 resident warps: over '
        'the shared memory one program may have, it cannot launch; compile '
        's: from an empty Triton cache, on this CPU (the shipped '
        f'configurations: {shipped:.1f} s in all, one after another)\n',
    )
    core.write_json(osp.join(args.out_dir, 'results.json'), results)
    core.write_table(osp.join(args.out_dir, 'table.md'), '\n'.join(lines), [])
    if args.loops:
        loops = '\n'.join(loop_table(results))
        core.write_table(osp.join(args.out_dir, 'loops.md'), loops, [])
    return results


def loop_table(results):
    """Markdown lines: every kernel's instructions and narrow accesses,
    then each of its loops (smallest first; a body includes its inner
    loops)."""
    kinds = list(OPCODES)
    header = ['kernel', 'warps', 'code', 'instructions', *kinds]
    header.append('narrow accesses')
    rows = []
    for row in results:
        name = [row['kernel'], str(row['num_warps'])]
        counts = [''] * len(kinds) + [str(row['narrow_accesses'])]
        rows.append(name + ['whole', str(row['instructions']), *counts])
        for loop in row['loops']:
            where = f'loop {loop["start"]}-{loop["end"]}'
            counts = [str(loop[k]) for k in ['instructions', *kinds]]
            rows.append(name + [where, *counts, ''])
    return core.markdown_table(header, rows, '---' + ':' * 7)


if __name__ == '__main__':
    main()
