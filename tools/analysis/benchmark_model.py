"""Throughput and peak memory of a softmax ViT against linear-attention ViTs.

The reference is mmpretrain's ``VisionTransformer``; every linear model is a
``LinearVisionTransformer`` of the same arch (MHLA and TTT without a class
token, with sin-cos position embedding and average pooling, as in the
paper). Two modes: forward (eval, no grad) and forward+backward (train,
loss = sum of the features); each (model, resolution, mode) runs in a fresh
forked process. A mode runs once to warm up, then up to ``--repeats`` timed
runs while their total stays under ``--budget-s`` (a warm-up longer than the
budget is itself the measurement); the best time gives images/s. Peak memory
is the rise of the process's peak resident set (VmHWM, reset first) above
its size with the model built: activations, workspaces and, with backward,
gradients. Linux with glibc only (/proc, mallopt).

Writes results.json, table.md and benchmark_model.png to ``--out-dir`` and
prints the table with the ratios to softmax (speed-up = images/s ratio,
memory = peak ratio).

Example::

    python tools/analysis/benchmark_model.py --out-dir work_dirs/bench
"""

import argparse
import json
import os.path as osp
import time

import torch
from mmengine.utils import mkdir_or_exist
from mmpretrain.models import VisionTransformer

import mmlvit  # noqa: F401
from mmlvit.models.attentions import registered_operators
from mmlvit.models.backbones import LinearVisionTransformer
from mmlvit.utils import measure_step, run_in_child

SOFTMAX = 'softmax'
MODES = ('forward', 'forward+backward')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Images/s and peak memory of a softmax ViT vs linear '
        'ViTs, forward and forward+backward, at several resolutions.'
    )
    parser.add_argument(
        '--operators',
        nargs='+',
        default=None,
        choices=registered_operators(linear_cost=True),
        metavar='OPERATOR',
        help='linear attention operators (registered names); default: '
        'every registered one',
    )
    parser.add_argument(
        '--resolutions',
        nargs='+',
        type=int,
        default=[224, 448, 896, 1792],
        help='square input sizes in pixels',
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
    parser.add_argument('--batch-size', type=int, default=1)
    parser.add_argument(
        '--repeats', type=int, default=3, help='timed runs per mode (max)'
    )
    parser.add_argument(
        '--budget-s',
        type=float,
        default=60.0,
        help='stop repeating once the timed runs of a mode took this long',
    )
    parser.add_argument(
        '--threads',
        type=int,
        default=None,
        help="torch intra-op threads (default: torch's); on a loaded "
        'machine 1 avoids timing OpenMP barriers waiting for a preempted '
        'thread',
    )
    parser.add_argument('--out-dir', default='work_dirs/benchmark_model')
    args = parser.parse_args(argv)
    args.operators = args.operators or list(
        registered_operators(linear_cost=True)
    )
    args.operators += [
        hybrid_name(op, k) for op in args.operators for k in args.keep_softmax
    ]
    return args


def hybrid_name(operator, keep_softmax):
    return f'{operator}+{keep_softmax}softmax'


def build_model(name, arch, img_size):
    """The softmax reference, a linear ViT with operator ``name``, or a
    hybrid ``OPERATOR+Ksoftmax`` whose last K blocks keep softmax
    attention."""
    if name == SOFTMAX:
        return VisionTransformer(arch=arch, img_size=img_size)
    operator, _, keep = name.partition('+')
    attn_cfg = dict(type=operator)
    if keep:
        depth = VisionTransformer.arch_zoo[arch]['num_layers']
        k = int(keep.removesuffix('softmax'))
        attn_cfg = [dict(type=operator)] * (depth - k) + [
            dict(type='SoftmaxAttention')
        ] * k
    # Patch-tokens-only operators get their own token layout (no class
    # token, average pooling, sin-cos positions) from the backbone.
    return LinearVisionTransformer(
        arch=arch, img_size=img_size, attn_cfg=attn_cfg
    )


def measure_case(name, size, mode, args):
    """One model, resolution and mode (run in a child process: see
    :func:`mmlvit.utils.run_in_child`)."""
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build_model(name, args.arch, size)
    images = torch.randn(args.batch_size, 3, size, size)

    def forward():
        with torch.no_grad():
            model(images)

    def forward_backward():
        model.zero_grad(set_to_none=True)
        model(images)[0].sum().backward()

    training = mode == 'forward+backward'
    model.train(training)
    result = measure_step(
        forward_backward if training else forward, args.repeats, args.budget_s
    )
    result['images_per_s'] = args.batch_size / min(result['times'])
    return result


def ratio_rows(results, operators, resolutions):
    """Rows of the table: per model, resolution and mode, the absolute
    figures and their ratios to softmax."""
    rows = []
    for size in resolutions:
        ref = results[SOFTMAX][str(size)]
        for name in [SOFTMAX] + operators:
            res = results[name][str(size)]
            row = dict(model=name, size=size)
            for mode in MODES:
                m, r = res.get(mode), ref.get(mode)
                if m is None or r is None:
                    continue  # mode not measured (--modes)
                if 'error' in m or 'error' in r:
                    row[mode] = None
                    continue
                row[mode] = dict(
                    images_per_s=m['images_per_s'],
                    speedup=m['images_per_s'] / r['images_per_s'],
                    peak_mib=m['peak_mib'],
                    memory_ratio=m['peak_mib'] / r['peak_mib'],
                    runs=len(m['times']),
                )
            rows.append(row)
    return rows


def markdown_table(rows):
    header = (
        '| model | px | fwd img/s | fwd speed-up | fwd peak MiB | fwd mem. '
        'ratio | f+b img/s | f+b speed-up | f+b peak MiB | f+b mem. ratio |'
    )
    lines = [header, '|' + '---|' * 10]
    for row in rows:
        cells = [row['model'], str(row['size'])]
        for mode in MODES:
            if mode not in row:
                cells += ['-'] * 4
                continue
            m = row[mode]
            if m is None:
                cells += ['failed'] * 4
                continue
            cells += [
                f'{m["images_per_s"]:.3g}',
                f'{m["speedup"]:.2f}x',
                f'{m["peak_mib"]:.0f}',
                f'{m["memory_ratio"]:.2f}',
            ]
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def target_verdicts(rows):
    """The issue's targets: every linear model faster than softmax from
    896 px on, and at least 3x faster at 1792 px (both modes)."""
    verdicts = []
    for row in rows:
        if row['model'] == SOFTMAX or row['size'] < 896:
            continue
        need = 3.0 if row['size'] >= 1792 else 1.0
        for mode in (m for m in MODES if m in row):
            m = row[mode]
            ok = m is not None and m['speedup'] > need
            got = 'failed' if m is None else f'{m["speedup"]:.2f}x'
            verdicts.append(
                f'{"met " if ok else "MISSED"} {row["model"]} {row["size"]} '
                f'px {mode}: {got} (target > {need:g}x)'
            )
    return verdicts


def plot(rows, operators, path):
    """Speed-up and memory ratio against input size, one panel per mode."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    sizes = sorted({r['size'] for r in rows})
    panels = [
        ('speedup', 'images/s, ratio to softmax'),
        ('memory_ratio', 'peak memory, ratio to softmax'),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for i, mode in enumerate(MODES):
        for j, (key, label) in enumerate(panels):
            ax = axes[i][j]
            for name in operators:
                points = [
                    (r['size'], r[mode][key])
                    for r in rows
                    if r['model'] == name and r.get(mode) is not None
                ]
                if points:
                    ax.plot(*zip(*points), marker='o', label=name)
            ax.axhline(1.0, color='k', linestyle='--', linewidth=1)
            if key == 'speedup':
                ax.axhline(3.0, color='grey', linestyle=':', linewidth=1)
            ax.set_xscale('log', base=2)
            ax.set_yscale('log', base=2)
            ax.set_xticks(sizes, [str(size) for size in sizes])
            ax.xaxis.set_minor_locator(plt.NullLocator())
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.set_title(f'{mode}: {label}')
            ax.set_xlabel('input size (px)')
            ax.grid(True, which='both', alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    mkdir_or_exist(args.out_dir)
    results = {name: {} for name in [SOFTMAX] + args.operators}
    for size in args.resolutions:
        for mode in args.modes:  # the models of one mode run back to back
            for name, per_size in results.items():
                start = time.perf_counter()
                res = run_in_child(measure_case, name, size, mode, args)
                per_size.setdefault(str(size), {})[mode] = res
                if 'error' in res:
                    error = res['error'].strip().splitlines()[-1]
                    summary = f'FAILED: {error}'
                else:
                    summary = (
                        f'{res["images_per_s"]:.3g} img/s, '
                        f'{res["peak_mib"]:.0f} MiB, {len(res["times"])} runs'
                    )
                print(
                    f'{name} {size}px {mode}: {summary} '
                    f'[{time.perf_counter() - start:.0f} s]',
                    flush=True,
                )
                with open(osp.join(args.out_dir, 'results.json'), 'w') as f:
                    json.dump(
                        dict(config=vars(args), results=results), f, indent=1
                    )

    rows = ratio_rows(results, args.operators, args.resolutions)
    table = markdown_table(rows)
    verdicts = target_verdicts(rows)
    with open(osp.join(args.out_dir, 'table.md'), 'w') as f:
        f.write(table + '\n\n' + '\n'.join(verdicts) + '\n')
    plot(rows, args.operators, osp.join(args.out_dir, 'benchmark_model.png'))
    print(table)
    print('\n'.join(verdicts))
    return rows


if __name__ == '__main__':
    main()
