"""Time and memory of attention operators against softmax attention (SDPA).

For each operator and token count N, one forward + backward pass of the
attention module alone (batch 1, gradients for the input and all
parameters) is timed next to ``SoftmaxAttention`` at the same grid, with
the speed-up over it and the FLOP ratio of the two modules (their ``flops``
methods, projections included): the arithmetic ceiling of the speed-up.

- CPU (float32 by default): the median over ``--repeats`` runs after one
  warm-up run, the operators taking turns within each round. Peak memory
  is the growth of the resident set (Linux ``VmHWM`` minus ``VmRSS``,
  after resetting the high-water mark through ``/proc/self/clear_refs``)
  during one forward + backward after warm-up, measured in a separate
  process started with ``MALLOC_MMAP_THRESHOLD_`` fixed at 64 KiB, so that
  every tensor larger than that is its own mapping, returned to the system
  when freed, and the resident set follows the live tensors. It counts
  activations, saved tensors, temporaries and the parameter gradients, not
  the weights or the input.
- CUDA (bf16 autocast by default; SDPA runs its flash kernel): each
  (operator, N) in this process; the first call (kernel compilation and
  autotuning) is timed apart, then the median of ``--repeats`` calls timed
  by CUDA events. Peak memory is ``torch.cuda.max_memory_allocated`` during
  one more call, after ``reset_peak_memory_stats``, minus the memory
  allocated before it. An out-of-memory case is listed as failed.

With ``GatedLinearAttention`` among the operators, the chunked GLA scan
(``mmlvit.ops.gla.gla_chunked``) is also timed against its token-by-token
recurrence (``gla_recurrent``) at ``--gla-tokens`` (0: not).

Example:
    python tools/analysis/benchmark_attention.py --repeats 5 \\
        --out-dir work_dirs/benchmark_attention
    python tools/analysis/benchmark_attention.py --device cuda \\
        --tokens 197 785 3137 12545 16385 65537 --gla-tokens 0
"""

import argparse
import json
import math
import os
import os.path as osp
import sys
from functools import partial

import torch
from mmpretrain.registry import MODELS

import mmlvit  # noqa: F401  (registers the operators)
from mmlvit.benchmark import (
    Deadline,
    add_device_arguments,
    autocast,
    check_device_arguments,
    cuda_peak_growth_mib,
    describe_device,
    interleaved_times,
    linear_fit_error,
    markdown_table,
    peak_resident_growth_mib,
    plots,
    ratio,
    run_in_process,
    run_memory_worker,
    status,
    write_json,
)
from mmlvit.models.attentions import registered_operators

REFERENCE = 'SoftmaxAttention'
TARGET_FRACTION = 0.7  # measured speed-up >= 70% of the FLOP ratio
TARGET_TOKENS = (3137, 12545)  # ... at these N
GLA_TARGET = 20.0  # chunked >= 20x faster than the recurrence
FIGURES = ('seconds', 'first_call_seconds', 'flops', 'peak_mib', 'failed')


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
        help='sequence length of the GLA chunked-vs-recurrent comparison '
        '(0: no comparison)',
    )
    parser.add_argument(
        '--threads',
        type=int,
        default=torch.get_num_threads(),
        help='torch intra-op threads (default: torch default)',
    )
    add_device_arguments(parser)
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
    args = check_device_arguments(parser, parser.parse_args(argv))
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


def make_step(name, num_tokens, args):
    """A closure running one forward + backward, and the module's FLOPs."""
    torch.manual_seed(0)
    hw_shape, n = grid(name, num_tokens)
    with torch.device(args.device):
        module = MODELS.build(
            dict(
                type=name, embed_dims=args.embed_dims, num_heads=args.num_heads
            )
        ).to(args.device)
        x = torch.randn(1, n, args.embed_dims, requires_grad=True)
        grad = torch.randn(1, n, args.embed_dims)

    def step():
        with autocast(args.device, args.dtype):
            out = module(x, hw_shape)
        out.backward(grad.to(out.dtype))
        module.zero_grad(set_to_none=True)
        x.grad = None

    return step, module.flops(n, hw_shape)


def measure_cuda(name, n, args):
    """One (operator, N) on CUDA: first call, median, peak growth."""
    step, flops = make_step(name, n, args)
    times = interleaved_times({name: step}, args.repeats, args.device)[name]
    return dict(
        seconds=times['median_s'],
        first_call_seconds=times['first_s'],
        flops=flops,
        peak_mib=cuda_peak_growth_mib(step),
    )


def measure_cpu(names, n, args):
    """{name: result} at one N, the operators taking turns."""
    steps, flops = {}, {}
    for name in names:
        steps[name], flops[name] = make_step(name, n, args)
    times = interleaved_times(steps, args.repeats)
    return {
        name: dict(
            seconds=times[name]['median_s'],
            first_call_seconds=times[name]['first_s'],
            flops=flops[name],
        )
        for name in names
    }


def measure(args, figures, save):
    """Fill ``figures`` ({figure: {name: {N: value}}}), saving after each
    case, until ``--max-seconds``; on CUDA operator by operator."""
    deadline = Deadline(args.max_seconds)
    names = [REFERENCE] + args.operators
    skipped = dict(skipped=f'--max-seconds {args.max_seconds} reached')
    if args.device == 'cuda':
        cases = [(name, n) for name in names for n in args.tokens]
    else:
        cases = [(name, n) for n in args.tokens for name in names]
    at_n = {}
    for name, n in cases:
        if deadline.expired():
            res = skipped
        elif args.device == 'cuda':
            res = run_in_process(measure_cuda, name, n, args)
        else:
            if n not in at_n:
                at_n = {n: measure_cpu(names, n, args)}
            res = at_n[n][name]
        for key, value in res.items():
            if key in FIGURES:
                figures[key].setdefault(name, {})[n] = value
        text = status(res)
        if text == 'ok':
            text = f'{1e3 * res["seconds"]:10.1f} ms'
        else:
            figures['failed'].setdefault(name, {})[n] = text
        print(f'{name:24s} N={n:6d} {text}', flush=True)
        save()


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
    """CPU: {name: {N: MiB}} measured in a child process."""
    results = run_memory_worker(__file__, [*argv, '--memory-worker'])
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
    with torch.device(args.device):
        q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
        g = torch.nn.functional.logsigmoid(torch.randn(shape)) / 16
        grad = torch.randn(shape)
    g.requires_grad_()
    inputs = (q, k, v, g)
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
        times = interleaved_times(fns, args.repeats, args.device)
        for label, figures in times.items():
            results[label][key] = figures['median_s']
    return results


def render(args, figures, gla):
    """The report as Markdown lines, and the list of missed targets."""
    seconds, flops, memory = (figures[k] for k in ('seconds', 'flops',
                                                   'peak_mib'))  # fmt: skip
    ref = seconds.get(REFERENCE, {})
    cuda = args.device == 'cuda'
    lines = [
        f'C={args.embed_dims}, {args.num_heads} heads, batch 1, '
        f'{describe_device(args.device, args.dtype, args.threads)}, median '
        f'of {args.repeats} runs of forward + backward.',
        '',
    ]
    header = ['operator', 'N', 'time (ms)'] + ['first call (ms)'] * cuda
    header += ['speed-up', 'FLOP ratio', 'speed-up / FLOP ratio']
    header += ['peak memory (MiB)', 'memory / softmax']
    rows, missed = [], []
    for name in [REFERENCE] + args.operators:
        for n in args.tokens:
            n_op = grid(name, n)[1]
            if n not in seconds.get(name, {}):
                failed = figures['failed'].get(name, {}).get(n, 'not run')
                rows.append([name, n_op, failed] + [''] * (len(header) - 3))
                continue
            own = seconds[name][n]
            speedup = ref[n] / own if n in ref else math.nan
            flop_ratio = flops[REFERENCE].get(n, math.nan) / flops[name][n]
            efficiency = speedup / flop_ratio
            rows.append(
                [name, n_op, f'{1e3 * own:.1f}']
                + [f'{1e3 * figures["first_call_seconds"][name][n]:.1f}']
                * cuda
                + [f'{speedup:.2f}', f'{flop_ratio:.2f}', f'{efficiency:.2f}']
                + [
                    f'{memory[name][n]:.1f}',
                    f'{ratio(memory[name][n], memory[REFERENCE][n]):.2f}'
                    if n in memory.get(REFERENCE, {})
                    else 'nan',
                ]
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
    lines += markdown_table(header, rows, '-' + ':' * (len(header) - 1))
    lines += [
        '',
        'Peak-memory growth (largest relative deviation from a straight '
        'line a + bN over the measured N; peak at the largest N over the '
        'peak at the next one, against the token ratio):',
        '',
    ]
    for name in [REFERENCE] + args.operators:
        ordered = sorted(memory.get(name, {}))
        if not ordered:
            continue
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


def plot(args, figures, path):
    plt = plots.pyplot()
    fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in [REFERENCE] + args.operators:
        style = dict(marker='o', label=name)
        if name == REFERENCE:
            style.update(color='black', linewidth=2.5)
        for ax, key, scale in ((ax_time, 'seconds', 1e3),
                               (ax_mem, 'peak_mib', 1)):  # fmt: skip
            points = sorted(figures[key].get(name, {}).items())
            if points:
                ns, values = zip(*points)
                ax.plot(ns, [scale * v for v in values], **style)
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
    where = 'CPU' if args.device == 'cpu' else f'CUDA, {args.dtype}'
    fig.suptitle(
        f'Attention operators, C={args.embed_dims}, '
        f'{args.num_heads} heads, batch 1, {where}'
    )
    plots.save(fig, path)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.memory_worker:
        memory_worker(args)
        return 0
    os.makedirs(args.out_dir, exist_ok=True)
    figures = {key: {} for key in FIGURES}
    out = dict(
        device=describe_device(args.device, args.dtype, args.threads),
        gla_scan_seconds=None,
        missed=None,
    )

    def save():
        json_path = osp.join(args.out_dir, 'attention_benchmark.json')
        write_json(json_path, dict(figures, **out))

    measure(args, figures, save)
    if args.device == 'cpu':
        figures['peak_mib'] = measure_memory(args, argv)
    if 'GatedLinearAttention' in args.operators and args.gla_tokens:
        out['gla_scan_seconds'] = time_gla_scans(args)
    lines, missed = render(args, figures, out['gla_scan_seconds'])
    lines += ['', 'Targets: all met.' if not missed else 'Targets missed:']
    lines += [f'- {m}' for m in missed]
    out['missed'] = missed
    save()
    with open(osp.join(args.out_dir, 'attention_benchmark.md'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    plot(args, figures, osp.join(args.out_dir, 'attention_benchmark.png'))
    print('\n'.join(lines))
    return 0


if __name__ == '__main__':
    sys.exit(main())
