"""Throughput and peak memory of a softmax ViT against linear-attention ViTs.

The reference is mmpretrain's ``VisionTransformer``; every linear model is a
``LinearVisionTransformer`` of the same arch (MHLA and TTT without a class
token, with sin-cos position embedding and average pooling, as in the
paper). On CUDA timm's ``VisionTransformer`` of the same shape (patch 16)
runs beside them when timm imports (model ``timm``). Two modes: forward
(eval, no grad) and forward+backward (train, loss = sum of the features).

- CPU: each (model, resolution, mode) runs in a fresh forked process. A
  mode runs once to warm up, then up to ``--repeats`` timed runs while
  their total stays under ``--budget-s`` (a warm-up longer than the budget
  is itself the measurement); the best time gives images/s. Peak memory is
  the rise of the process's peak resident set (VmHWM, reset first) above
  its size with the model built. Linux with glibc only (/proc, mallopt).
- CUDA: every case runs in this process under autocast (``--dtype``,
  default bf16): the first call (compilation, autotuning) is timed apart,
  then up to ``--repeats`` calls timed by CUDA events; the median gives
  images/s. Peak memory is ``torch.cuda.max_memory_allocated`` over one
  more call minus the memory allocated before it (weights and inputs not
  counted). An out-of-memory case is listed as failed.

FLOP ratio: the forward FLOPs of the softmax model over the model's (each
block's attention ``flops`` method plus the MLP and the patch embedding),
the arithmetic ceiling of the speed-up (forward + backward has about 3x
the forward FLOPs of every model, so the same ratio).

Writes results.json, table.md and benchmark_model.png to ``--out-dir``
(results.json after every case) and prints the table with the ratios to
softmax (speed-up = images/s ratio, memory = peak ratio).

Example::

    python tools/analysis/benchmark_model.py --out-dir work_dirs/bench
    python tools/analysis/benchmark_model.py --device cuda \\
        --resolutions 224 512 1024 2048 --batch-sizes 128 32 8 2
"""

import argparse
import itertools
import os.path as osp
import sys
from pathlib import Path

import torch
from mmengine.utils import mkdir_or_exist

import mmlvit  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab import benchmarks as core
from lab.benchmarks.vit_models import (
    SOFTMAX,
    TIMM,
    forward_flops,
    hybrid_name,
    model_step,
    timm_vit_class,
)

MODES = ('forward', 'forward+backward')
SHORT = {'forward': 'fwd', 'forward+backward': 'f+b'}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Images/s and peak memory of a softmax ViT vs linear '
        'ViTs, forward and forward+backward, at several resolutions.'
    )
    core.add_operator_argument(parser)
    parser.add_argument(
        '--resolutions',
        nargs='+',
        type=int,
        default=[224, 448, 896, 1792],
        help='square input sizes in pixels',
    )
    parser.add_argument(
        '--batch-sizes',
        nargs='+',
        type=int,
        default=[1],
        help='one batch size, or one per resolution',
    )
    parser.add_argument(
        '--keep-softmax',
        nargs='+',
        type=int,
        default=[],
        metavar='K',
        help='also measure hybrids of every operator whose last K blocks '
        'keep softmax attention (model name OPERATOR+Ksoftmax)',
    )
    parser.add_argument(
        '--modes', nargs='+', choices=MODES, default=list(MODES)
    )
    parser.add_argument('--arch', default='b', help='ViT arch (zoo name)')
    core.add_timing_arguments(parser)
    core.add_device_arguments(parser)
    core.add_out_dir_argument(parser, 'work_dirs/benchmark_model')
    args = core.check_device_arguments(parser, parser.parse_args(argv))
    if len(args.batch_sizes) not in (1, len(args.resolutions)):
        parser.error('--batch-sizes: give one, or one per resolution')
    args.operators = core.operators_or_all(args.operators)
    args.operators += [
        hybrid_name(op, k) for op in args.operators for k in args.keep_softmax
    ]
    args.references = [SOFTMAX]
    if args.device == 'cuda' and timm_vit_class() is not None:
        args.references.append(TIMM)
    return args


def batch_size(args, size):
    sizes = args.batch_sizes * len(args.resolutions)
    return sizes[args.resolutions.index(size)]


def measure_case(case, args):
    """One (model, resolution, mode) case."""
    name, size, mode = case[0], int(case[1]), case[2]
    if args.threads:
        torch.set_num_threads(args.threads)
    batch = batch_size(args, size)
    training = mode == 'forward+backward'
    step = model_step(
        name, args.arch, size, batch, args.device, args.dtype, training
    )
    result = core.measure_step(step, args.repeats, args.budget_s, args.device)
    result['seconds'] = core.steady_seconds(result['times'], args.device)
    result['images_per_s'] = batch / result['seconds']
    result['flops'] = forward_flops(name, args.arch, size)
    return result


def ratio_rows(results, models, resolutions):
    """Rows of the table: per model, resolution and mode, the absolute
    figures and their ratios to softmax."""
    rows = []
    for size in resolutions:
        ref = results[SOFTMAX][str(size)]
        for name in models:
            res = results[name][str(size)]
            row = dict(model=name, size=size)
            for mode in (m for m in MODES if m in res):
                m, r = res[mode], ref.get(mode, {})
                if core.status(m) != 'ok' or core.status(r) != 'ok':
                    row[mode] = None
                    row.setdefault('status', {})[mode] = core.status(m)
                    continue
                ratios = core.compare(m, r)
                row[mode] = dict(
                    images_per_s=m['images_per_s'],
                    speedup=ratios['speedup'],
                    peak_mib=m['peak_mib'],
                    memory_ratio=ratios['memory_ratio'],
                    runs=len(m['times']),
                    first_call_s=m['warm_up_s'],
                    flop_ratio=ratios.get('flop_ratio'),
                )
            rows.append(row)
    return rows


def table(rows, device):
    """Markdown lines; on CUDA each mode also shows the FLOP ratio (the
    speed-up's ceiling) and the first call's time."""
    cuda = device == 'cuda'
    header = ['model', 'px'] + ['batch'] * cuda
    for mode in MODES:
        s = SHORT[mode]
        header += [f'{s} img/s', f'{s} speed-up']
        header += [f'{s} FLOP ratio'] * cuda
        header += [f'{s} peak MiB', f'{s} mem. ratio']
        header += [f'{s} first call s'] * cuda
    cells_per_mode = 6 if cuda else 4
    lines = []
    for row in rows:
        cells = [row['model'], str(row['size'])]
        cells += [str(row.get('batch', ''))] * cuda
        for mode in MODES:
            m = row.get(mode, False)
            if m is False:
                cells += ['-'] * cells_per_mode
            elif m is None:
                failed = row['status'][mode]
                cells += [failed] + [''] * (cells_per_mode - 1)
            else:
                cells += [f'{m["images_per_s"]:.3g}', f'{m["speedup"]:.2f}x']
                cells += [f'{m["flop_ratio"]:.2f}'] * cuda
                cells += [f'{m["peak_mib"]:.0f}', f'{m["memory_ratio"]:.2f}']
                cells += [f'{m["first_call_s"]:.2f}'] * cuda
        lines.append(cells)
    align = '|' + '---|' * len(header)
    return '\n'.join(core.markdown_table(header, lines, align))


def target_verdicts(rows):
    """The targets: every linear model faster than softmax from 896 px on,
    and at least 3x faster at 1792 px (both modes)."""
    verdicts = []
    for row in rows:
        if row['model'] in (SOFTMAX, TIMM) or row['size'] < 896:
            continue
        need = 3.0 if row['size'] >= 1792 else 1.0
        for mode in (m for m in MODES if m in row):
            m = row[mode]
            got = 'failed' if m is None else f'{m["speedup"]:.2f}x'
            verdicts.append(
                core.verdict(
                    m is not None and m['speedup'] > need,
                    f'{row["model"]} {row["size"]} px {mode}',
                    f'{got} (target > {need:g}x)',
                )
            )
    return verdicts


def plot(rows, models, path):
    """Speed-up and memory ratio against input size, one panel per mode."""
    sizes = sorted({r['size'] for r in rows})
    ones = [(1.0, dict(color='k', linestyle='--', linewidth=1))]
    three = [(3.0, dict(color='grey', linestyle=':', linewidth=1))]
    panels = [
        dict(series={name: [(r['size'], r[mode][key]) for r in rows
                            if r['model'] == name and r.get(mode) is not None]
                     for name in models},
             title=f'{mode}: {label}', xlabel='input size (px)', sizes=sizes,
             ybase=2, hlines=ones + three * (key == 'speedup'),
             legend=(mode, key) == (MODES[0], 'speedup'))
        for mode in MODES
        for key, label in (('speedup', 'images/s, ratio to softmax'),
                           ('memory_ratio', 'peak memory, ratio to softmax'))
    ]  # fmt: skip
    core.plots.line_panels(path, panels, columns=2, panel_size=(5.5, 4))


def cases(args):
    """(model, px, mode) paths; on the CPU the models of one mode run back
    to back, on CUDA one model's cases do (one compilation each)."""
    models = args.references + args.operators
    sizes = [str(size) for size in args.resolutions]
    if args.device == 'cuda':
        return list(itertools.product(models, sizes, args.modes))
    grid = itertools.product(sizes, args.modes, models)
    return [(name, size, mode) for size, mode, name in grid]


def summary(res):
    return (
        f'{res["images_per_s"]:.3g} img/s, {res["peak_mib"]:.0f} MiB, '
        f'{len(res["times"])} runs, first call {res["warm_up_s"]:.2f} s'
    )


def main(argv=None):
    args = parse_args(argv)
    mkdir_or_exist(args.out_dir)
    results = core.run_grid(
        cases(args),
        lambda case: measure_case(case, args),
        args,
        osp.join(args.out_dir, 'results.json'),
        describe=lambda c: f'{c[0]} {c[1]}px {c[2]}',
        summary=summary,
    )
    models = args.references + args.operators
    rows = ratio_rows(results, models, args.resolutions)
    for row in rows:
        row['batch'] = batch_size(args, row['size'])
    core.write_table(
        osp.join(args.out_dir, 'table.md'),
        table(rows, args.device),
        target_verdicts(rows),
    )
    plot(rows, models[1:], osp.join(args.out_dir, 'benchmark_model.png'))
    return rows


if __name__ == '__main__':
    main()
