"""Time and memory of attention operators against softmax attention (SDPA).

For each operator and token count N, one forward + backward pass of the
attention module alone (batch 1, float32, gradients for the input and all
parameters) is timed on the CPU; the median over ``--repeats`` runs after one
warm-up run is reported, next to the speed-up over ``SoftmaxAttention`` at the
same grid and the FLOP ratio of the two modules (their ``flops`` methods,
projections included).

Peak memory is the growth of the resident set (Linux ``VmHWM`` minus
``VmRSS``, after resetting the high-water mark through
``/proc/self/clear_refs``) during one forward + backward after warm-up,
measured in a separate process started with ``MALLOC_MMAP_THRESHOLD_`` fixed
at 64 KiB, so that every tensor larger than that is its own mapping, returned
to the system when freed, and the resident set follows the live tensors. It
counts activations, saved tensors, temporaries and the parameter gradients,
not the weights or the input.

With ``GatedLinearAttention`` among the operators, the chunked GLA scan
(``mmlvit.ops.gla.gla_chunked``) is also timed against its token-by-token
recurrence (``gla_recurrent``) at ``--gla-tokens``.

Example:
    python tools/analysis/benchmark_attention.py --repeats 5 \\
        --out-dir work_dirs/benchmark_attention
"""

import argparse
import json
import math
import os
import os.path as osp
import statistics
import subprocess
import sys
import time
from functools import partial

import torch
from mmpretrain.registry import MODELS

import mmlvit  # noqa: F401  (registers the operators)
from mmlvit.models.attentions import registered_operators
from mmlvit.utils import peak_resident_growth_mib

REFERENCE = 'SoftmaxAttention'
TARGET_FRACTION = 0.7  # measured speed-up >= 70% of the FLOP ratio
TARGET_TOKENS = (3137, 12545)  # ... at these N
GLA_TARGET = 20.0  # chunked >= 20x faster than the recurrence


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--operators',
        nargs='+',
        default=None,
        choices=registered_operators(),
        metavar='OPERATOR',
        help='registered operator names compared with SoftmaxAttention '
        '(default: every registered linear-cost operator)',
    )
    parser.add_argument(
        '--tokens',
        nargs='+',
        type=int,
        default=[197, 785, 3137, 12545],
        help='token counts N = side^2 + 1 (class token); operators '
        'without a class token get side^2',
    )
    parser.add_argument(
        '--repeats', type=int, default=5, help='timed runs per measurement'
    )
    parser.add_argument('--embed-dims', type=int, default=768)
    parser.add_argument('--num-heads', type=int, default=12)
    parser.add_argument(
        '--gla-tokens',
        type=int,
        default=3137,
        help='sequence length of the GLA chunked-vs-recurrent comparison',
    )
    parser.add_argument(
        '--threads',
        type=int,
        default=torch.get_num_threads(),
        help='torch intra-op threads (default: torch default)',
    )
    parser.add_argument(
        '--out-dir',
        default='work_dirs/benchmark_attention',
        help='where the table (.md), the figures (.json) and the plot '
        '(.png) go',
    )
    parser.add_argument(
        '--memory-worker',
        action='store_true',
        help=argparse.SUPPRESS,  # internal: measure memory, print JSON
    )
    args = parser.parse_args(argv)
    args.operators = args.operators or list(
        registered_operators(linear_cost=True)
    )
    args.operators = [name for name in args.operators if name != REFERENCE]
    for n in args.tokens:
        side = math.isqrt(n - 1)
        if side * side != n - 1:
            parser.error(f'--tokens {n} is not side^2 + 1')
    return args


def grid(name, num_tokens):
    """(hw_shape, N) the operator sees for a benchmark token count."""
    side = math.isqrt(num_tokens - 1)
    with_cls = not registered_operators()[name].patch_tokens_only
    return (side, side), side * side + int(with_cls)


def build(name, args):
    torch.manual_seed(0)
    return MODELS.build(
        dict(type=name, embed_dims=args.embed_dims, num_heads=args.num_heads)
    )


def make_step(name, num_tokens, args):
    """A closure running one forward + backward, and the module's FLOPs."""
    module = build(name, args)
    hw_shape, n = grid(name, num_tokens)
    x = torch.randn(1, n, args.embed_dims, requires_grad=True)
    grad = torch.randn(1, n, args.embed_dims)

    def step():
        module(x, hw_shape).backward(grad)
        module.zero_grad(set_to_none=True)
        x.grad = None

    return step, module.flops(n, hw_shape)


def median_seconds(fns, repeats):
    """Median wall time of each callable over ``repeats`` rounds, after one
    warm-up call each. The callables take turns within a round, so a burst
    of load from elsewhere on the machine hits all of them alike."""
    for fn in fns.values():
        fn()
    times = {key: [] for key in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    return {key: statistics.median(ts) for key, ts in times.items()}


def time_operators(args):
    """{name: {N: seconds}} and {name: {N: FLOPs}} of forward + backward."""
    names = [REFERENCE] + args.operators
    timing = {name: {} for name in names}
    flops = {name: {} for name in names}
    for n in args.tokens:
        steps = {}
        for name in names:
            steps[name], flops[name][n] = make_step(name, n, args)
        for name, seconds in median_seconds(steps, args.repeats).items():
            timing[name][n] = seconds
            print(f'{name:24s} N={n:6d} {1e3 * seconds:10.1f} ms', flush=True)
        del steps
    return timing, flops


def memory_worker(args):
    """Runs in the child process: print {name: {N: MiB}} as JSON."""
    results = {}
    for name in [REFERENCE] + args.operators:
        results[name] = {}
        for n in args.tokens:
            step, _ = make_step(name, n, args)
            results[name][n] = peak_resident_growth_mib(step)
            del step
    print(json.dumps(results))


def measure_memory(args, argv):
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_='65536')
    out = subprocess.run(
        [sys.executable, osp.abspath(__file__), *argv, '--memory-worker'],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    results = json.loads(out.strip().splitlines()[-1])
    return {
        name: {int(n): mib for n, mib in per_n.items()}
        for name, per_n in results.items()
    }


def time_gla_scans(args):
    """Seconds of the chunked and the recurrent causal GLA scan, forward
    only and forward + backward, at T = ``--gla-tokens``."""
    from mmlvit.ops.gla import gla_chunked, gla_recurrent

    torch.manual_seed(0)
    d = args.embed_dims // args.num_heads
    shape = (1, args.num_heads, args.gla_tokens, d)
    q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
    g = torch.nn.functional.logsigmoid(torch.randn(shape)) / 16
    g.requires_grad_()
    inputs = (q, k, v, g)
    grad = torch.randn(shape)
    scans = dict(chunked=gla_chunked, recurrent=gla_recurrent)

    def forward(scan):
        with torch.no_grad():
            scan(*inputs)

    def forward_backward(scan):
        scan(*inputs).backward(grad)
        for t in inputs:
            t.grad = None

    results = {label: {} for label in scans}
    for key, run in (
        ('forward', forward),
        ('forward_backward', forward_backward),
    ):
        fns = {label: partial(run, scan) for label, scan in scans.items()}
        for label, seconds in median_seconds(fns, args.repeats).items():
            results[label][key] = seconds
    return results


def linear_fit_error(tokens, mib):
    """Largest deviation of the peaks from a least-squares line a + b N,
    relative to the largest peak (how far the growth is from linear).
    Two points or fewer always lie on a line: 0."""
    if len(tokens) < 3:
        return 0.0
    mean_n, mean_m = statistics.fmean(tokens), statistics.fmean(mib)
    var = sum((n - mean_n) ** 2 for n in tokens)
    slope = sum((n - mean_n) * (m - mean_m) for n, m in zip(tokens, mib))
    slope /= var
    residual = max(
        abs(m - (mean_m + slope * (n - mean_n))) for n, m in zip(tokens, mib)
    )
    return residual / (max(mib) or 1.0)


def ratio(a, b):
    """a / b, NaN when b is 0 (a peak below the page granularity)."""
    return a / b if b else math.nan


def render(args, timing, flops, memory, gla):
    """The report as Markdown lines, and the list of missed targets."""
    lines = [
        f'C={args.embed_dims}, {args.num_heads} heads, batch 1, float32, '
        f'{args.threads} threads, median of {args.repeats} runs of forward '
        '+ backward.',
        '',
        '| operator | N | time (ms) | speed-up | FLOP ratio | speed-up / '
        'FLOP ratio | peak memory (MiB) | memory / softmax |',
        '|---|---:|---:|---:|---:|---:|---:|---:|',
    ]
    missed = []
    for name in [REFERENCE] + args.operators:
        for n in args.tokens:
            _, n_op = grid(name, n)
            speedup = timing[REFERENCE][n] / timing[name][n]
            flop_ratio = flops[REFERENCE][n] / flops[name][n]
            efficiency = speedup / flop_ratio
            lines.append(
                f'| {name} | {n_op} | {1e3 * timing[name][n]:.1f} | '
                f'{speedup:.2f} | {flop_ratio:.2f} | {efficiency:.2f} | '
                f'{memory[name][n]:.1f} | '
                f'{ratio(memory[name][n], memory[REFERENCE][n]):.2f} |'
            )
            if (
                name != REFERENCE
                and n in TARGET_TOKENS
                and efficiency < TARGET_FRACTION
            ):
                missed.append(
                    f'{name} at N={n_op}: speed-up {speedup:.2f} < '
                    f'{TARGET_FRACTION:.0%} of the FLOP ratio {flop_ratio:.2f}'
                )
    lines += [
        '',
        'Peak-memory growth (largest relative deviation from a straight '
        'line a + bN over the measured N; peak at the largest N over the '
        'peak at the next one, against the token ratio):',
        '',
    ]
    ordered = sorted(args.tokens)
    for name in [REFERENCE] + args.operators:
        mib = [memory[name][n] for n in ordered]
        deviation = linear_fit_error(ordered, mib)
        growth = ''
        if len(ordered) > 1:
            growth = (
                f', x{ratio(mib[-1], mib[-2]):.2f} from N={ordered[-2]} to '
                f'{ordered[-1]} (tokens x{ordered[-1] / ordered[-2]:.2f})'
            )
        lines.append(f'- {name}: {deviation:.1%} off a line{growth}')
        if name != REFERENCE and len(ordered) > 2 and deviation > 0.1:
            missed.append(f'{name}: peak memory {deviation:.0%} off linear')
    if gla is not None:
        lines += [
            '',
            f'GLA causal scan, T={args.gla_tokens}, '
            f'{args.num_heads} heads of {args.embed_dims // args.num_heads}:',
            '',
            '| pass | chunked (ms) | recurrent (ms) | speed-up |',
            '|---|---:|---:|---:|',
        ]
        for key, label in (
            ('forward', 'forward'),
            ('forward_backward', 'forward + backward'),
        ):
            chunked, recurrent = gla['chunked'][key], gla['recurrent'][key]
            lines.append(
                f'| {label} | {1e3 * chunked:.1f} | '
                f'{1e3 * recurrent:.1f} | '
                f'{recurrent / chunked:.1f} |'
            )
            if recurrent / chunked < GLA_TARGET:
                missed.append(
                    f'GLA chunked scan ({label}) only '
                    f'{recurrent / chunked:.1f}x faster than the '
                    f'recurrence (target {GLA_TARGET:.0f}x)'
                )
    return lines, missed


def plot(args, timing, memory, path):
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in [REFERENCE] + args.operators:
        ns = sorted(args.tokens)
        style = dict(marker='o', label=name)
        if name == REFERENCE:
            style.update(color='black', linewidth=2.5)
        ax_time.plot(ns, [1e3 * timing[name][n] for n in ns], **style)
        ax_mem.plot(ns, [memory[name][n] for n in ns], **style)
    for ax, label in (
        (ax_time, 'forward + backward (ms)'),
        (ax_mem, 'peak memory (MiB)'),
    ):
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xlabel('tokens N')
        ax.set_ylabel(label)
        ax.grid(True, which='both', alpha=0.3)
    ax_time.legend(fontsize=8)
    fig.suptitle(
        f'Attention operators, C={args.embed_dims}, '
        f'{args.num_heads} heads, batch 1, CPU'
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.memory_worker:
        memory_worker(args)
        return 0
    timing, flops = time_operators(args)
    memory = measure_memory(args, argv)
    gla = (
        time_gla_scans(args)
        if 'GatedLinearAttention' in args.operators
        else None
    )

    lines, missed = render(args, timing, flops, memory, gla)
    lines += ['', 'Targets: all met.' if not missed else 'Targets missed:']
    lines += [f'- {m}' for m in missed]
    os.makedirs(args.out_dir, exist_ok=True)
    with open(osp.join(args.out_dir, 'attention_benchmark.md'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    with open(osp.join(args.out_dir, 'attention_benchmark.json'), 'w') as f:
        json.dump(
            dict(
                seconds=timing,
                flops=flops,
                peak_mib=memory,
                gla_scan_seconds=gla,
                missed=missed,
            ),
            f,
            indent=1,
        )
    plot(
        args, timing, memory, osp.join(args.out_dir, 'attention_benchmark.png')
    )
    print('\n'.join(lines))
    return 0


if __name__ == '__main__':
    sys.exit(main())
