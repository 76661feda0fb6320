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
from pathlib import Path

import torch

import mmlvit  # noqa: F401  (registers the operators)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab import benchmarks as core
from lab.benchmarks import describe_device, linear_fit_error  # noqa: F401
from lab.benchmarks.attention_steps import attention_step, token_grid
from lab.benchmarks.gla_scan import gla_scan_lines, time_gla_scans

REFERENCE = 'SoftmaxAttention'
TARGET_FRACTION = 0.7  # measured speed-up >= 70% of the FLOP ratio
TARGET_TOKENS = (3137, 12545)  # ... at these N
FIGURES = ('seconds', 'first_call_seconds', 'flops', 'peak_mib', 'failed')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    core.add_operator_argument(parser, linear_cost=None)
    parser.add_argument(
        '--tokens',
        nargs='+',
        type=int,
        default=[197, 785, 3137, 12545],
        help='token counts N = side^2 + 1 (class token); operators '
        'without a class token get side^2',
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
    core.add_timing_arguments(
        parser, repeats=5, budget_s=None, threads=torch.get_num_threads()
    )
    core.add_device_arguments(parser)
    core.add_out_dir_argument(
        parser,
        'work_dirs/benchmark_attention',
        'the table (.md), the figures (.json) and the plot (.png)',
    )
    core.add_memory_worker_argument(parser)
    args = core.check_device_arguments(parser, parser.parse_args(argv))
    operators = core.operators_or_all(args.operators)
    args.operators = [name for name in operators if name != REFERENCE]
    for n in args.tokens:
        side = math.isqrt(n - 1)
        if side * side != n - 1:
            parser.error(f'--tokens {n} is not side^2 + 1')
    return args


def make_step(name, num_tokens, args):
    """A closure running one forward + backward, and the module's FLOPs."""
    step, module = attention_step(
        name, num_tokens, args.embed_dims, args.num_heads, args.device,
        args.dtype,
    )  # fmt: skip
    hw_shape, n = token_grid(name, num_tokens)
    return step, module.flops(n, hw_shape)


def measure_at(names, n, args):
    """{name: result} at one N, the operators taking turns (on CUDA one at
    a time, with its peak growth)."""
    steps, flops = {}, {}
    for name in names:
        steps[name], flops[name] = make_step(name, n, args)
    times = core.interleaved_times(steps, args.repeats, args.device)
    results = {}
    for name in names:
        results[name] = dict(
            seconds=times[name]['median_s'],
            first_call_seconds=times[name]['first_s'],
            flops=flops[name],
        )
        if args.device == 'cuda':
            results[name]['peak_mib'] = core.cuda_peak_growth_mib(steps[name])
    return results


def measure(args, figures, save):
    """Fill ``figures`` ({figure: {name: {N: value}}}), saving after each
    case, until ``--max-seconds``; on CUDA operator by operator."""
    deadline = core.Deadline(args.max_seconds)
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
            res = core.run_in_process(measure_at, [name], n, args)
            res = res.get(name, res)
        else:
            if n not in at_n:
                at_n = {n: measure_at(names, n, args)}
            res = at_n[n][name]
        for key, value in res.items():
            if key in FIGURES:
                figures[key].setdefault(name, {})[n] = value
        text = core.status(res)
        if text == 'ok':
            text = f'{1e3 * res["seconds"]:10.1f} ms'
        else:
            figures['failed'].setdefault(name, {})[n] = text
        print(f'{name:24s} N={n:6d} {text}', flush=True)
        save()


def render(args, figures, gla):
    """The report as Markdown lines, and the list of missed targets."""
    names = [REFERENCE] + args.operators

    def case(name, n):
        return {key: figures[key][name][n] for key in ('seconds', 'flops',
                'peak_mib') if n in figures[key].get(name, {})}  # fmt: skip

    rows, missed = [], []
    for name in names:
        for n in args.tokens:
            row = dict(operator=name, N=token_grid(name, n)[1])
            row['status'] = figures['failed'].get(name, {}).get(n, 'not run')
            if n in figures['seconds'].get(name, {}):
                own = case(name, n)
                row.update(
                    own, status='ok', **core.compare(own, case(REFERENCE, n))
                )
                row['first'] = figures['first_call_seconds'][name][n]
            rows.append(row)
            fraction = row.get('fraction_of_flop_ratio', math.nan)
            if (
                name != REFERENCE
                and n in TARGET_TOKENS
                and fraction < TARGET_FRACTION
            ):
                missed.append(
                    f'{name} at N={row["N"]}: speed-up {row["speedup"]:.2f} < '
                    f'{TARGET_FRACTION:.0%} of the FLOP ratio '
                    f'{row["flop_ratio"]:.2f}'
                )
    ms = lambda seconds: f'{1e3 * seconds:.1f}'  # noqa: E731
    columns = [('operator', 'operator', '{}', '-'), ('N', 'N', '{}'),
               ('time (ms)', 'seconds', ms)]  # fmt: skip
    columns += [('first call (ms)', 'first', ms)] * (args.device == 'cuda')
    columns += [
        ('speed-up', 'speedup', '{:.2f}'),
        ('FLOP ratio', 'flop_ratio', '{:.2f}'),
        ('speed-up / FLOP ratio', 'fraction_of_flop_ratio', '{:.2f}'),
        ('peak memory (MiB)', 'peak_mib', '{:.1f}'),
        ('memory / softmax', 'memory_ratio', '{:.2f}'),
    ]
    lines = [
        f'C={args.embed_dims}, {args.num_heads} heads, batch 1, '
        f'{describe_device(args.device, args.dtype, args.threads)}, median '
        f'of {args.repeats} runs of forward + backward.',
        '',
        *core.column_table(columns, rows, keys=2, missing='nan'),
        '',
    ]
    growth, growth_missed = core.growth_lines(
        figures['peak_mib'], names, REFERENCE
    )
    lines, missed = lines + growth, missed + growth_missed
    if gla is not None:
        gla_lines, gla_missed = gla_scan_lines(
            gla, args.num_heads, args.embed_dims // args.num_heads,
            args.gla_tokens,
        )  # fmt: skip
        lines, missed = lines + [''] + gla_lines, missed + gla_missed
    return lines, missed


def plot(args, figures, path):
    names = [REFERENCE] + args.operators
    reference = {REFERENCE: dict(color='black', linewidth=2.5)}
    panels = []
    for key, scale, label in (
        ('seconds', 1e3, 'forward + backward (ms)'),
        ('peak_mib', 1, 'peak memory (MiB)'),
    ):
        series = {
            name: [
                (n, scale * v) for n, v in figures[key].get(name, {}).items()
            ]
            for name in names
        }
        panels.append(dict(series=series, styles=reference, ylabel=label,
                           xlabel='tokens N', legend=not panels))  # fmt: skip
    where = 'CPU' if args.device == 'cpu' else f'CUDA, {args.dtype}'
    core.plots.line_panels(
        path, panels, columns=2, panel_size=(5.5, 4.2),
        title=f'Attention operators, C={args.embed_dims}, '
        f'{args.num_heads} heads, batch 1, {where}',
    )  # fmt: skip


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.memory_worker:  # the child of core.worker_memory_table
        names = [REFERENCE] + args.operators
        step = lambda name, n: make_step(name, n, args)[0]  # noqa: E731
        print(json.dumps(core.memory_table(step, names, args.tokens)))
        return 0
    os.makedirs(args.out_dir, exist_ok=True)
    figures = {key: {} for key in FIGURES}
    device = describe_device(args.device, args.dtype, args.threads)
    out = dict(device=device, gla_scan_seconds=None, missed=None)

    def save():
        json_path = osp.join(args.out_dir, 'attention_benchmark.json')
        core.write_json(json_path, dict(figures, **out))

    measure(args, figures, save)
    if args.device == 'cpu':
        worker_argv = [*argv, '--memory-worker']
        figures['peak_mib'] = core.worker_memory_table(__file__, worker_argv)
    if 'GatedLinearAttention' in args.operators and args.gla_tokens:
        out['gla_scan_seconds'] = time_gla_scans(
            args.num_heads, args.embed_dims // args.num_heads,
            args.gla_tokens, args.repeats, args.device,
        )  # fmt: skip
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
