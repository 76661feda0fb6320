"""The command-line options every benchmark tool shares: the device, the
autocast dtype and a time budget."""

import argparse
import contextlib

import torch

DTYPES = {'fp32': torch.float32, 'bf16': torch.bfloat16, 'fp16': torch.float16}
DEFAULT_DTYPE = {'cpu': 'fp32', 'cuda': 'bf16'}


def add_device_arguments(parser):
    """Add ``--device``, ``--dtype`` and ``--max-seconds`` to ``parser``."""
    parser.add_argument(
        '--device',
        choices=('cpu', 'cuda'),
        default='cpu',
        help='where the cases run (cuda: the current GPU, in this process, '
        'timed with CUDA events)',
    )
    parser.add_argument(
        '--dtype',
        choices=tuple(DTYPES),
        default=None,
        help='autocast dtype (default: fp32 on cpu, i.e. no autocast; bf16 '
        'on cuda)',
    )
    parser.add_argument(
        '--max-seconds',
        type=float,
        default=None,
        help='start no case after this many seconds; the cases left are '
        'listed as skipped',
    )


def cuda_unavailable_reason():
    """Why ``--device cuda`` cannot run here, or None if it can."""
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return (
            f'--device cuda: this torch ({torch.__version__}) is built '
            'without CUDA'
        )
    return (
        f'--device cuda: no CUDA GPU is visible (torch {torch.__version__}, '
        f'built for CUDA {torch.version.cuda}: torch.cuda.is_available() '
        'is False)'
    )


def check_device_arguments(parser, args):
    """Fill the default dtype; exit with a parser error naming the problem
    when ``--device cuda`` is asked for on a machine without a CUDA GPU."""
    if args.device == 'cuda':
        reason = cuda_unavailable_reason()
        if reason:
            parser.error(reason)
    args.dtype = args.dtype or DEFAULT_DTYPE[args.device]
    return args


def autocast(device, dtype):
    """The autocast context of ``dtype`` on ``device`` (none for fp32)."""
    if dtype == 'fp32':
        return contextlib.nullcontext()
    return torch.autocast(device_type=device, dtype=DTYPES[dtype])


def describe_device(device, dtype, threads=None):
    """One line naming the device, the precision and (CPU) the threads."""
    precision = 'float32' if dtype == 'fp32' else f'{dtype} autocast'
    if device == 'cuda':
        return f'{torch.cuda.get_device_name()}, {precision}'
    threads = threads or torch.get_num_threads()
    return f'CPU, {threads} threads, {precision}'


def add_timing_arguments(parser, repeats=3, budget_s=60.0, threads=None):
    """Add ``--repeats``, ``--budget-s`` (not for ``budget_s=None``) and
    ``--threads`` (the timed calls of a case and the CPU threads)."""
    parser.add_argument(
        '--repeats',
        type=int,
        default=repeats,
        help='timed calls per case (max)',
    )
    if budget_s is not None:
        parser.add_argument(
            '--budget-s',
            type=float,
            default=budget_s,
            help='stop repeating once the timed calls of a case took this '
            'long',
        )
    parser.add_argument(
        '--threads',
        type=int,
        default=threads,
        help="torch intra-op threads (default: torch's); on a loaded "
        'machine 1 avoids timing OpenMP barriers waiting for a preempted '
        'thread (docs/benchmarks.md)',
    )


def add_subset_argument(parser, flag, names, what):
    """Add ``flag NAME ...``: a subset of ``names`` to run, all of them by
    default, ``what`` naming them in the help."""
    parser.add_argument(
        flag,
        nargs='+',
        choices=tuple(names),
        default=list(names),
        help=f'{what} (default: all)',
    )


def add_operator_argument(parser, default=None, linear_cost=True):
    """Add ``--operators``: registered operator names (the linear-cost ones
    unless ``linear_cost`` is None); the default ``None`` stands for every
    registered linear-cost one (see :func:`operators_or_all`)."""
    from mmlvit.models.attentions import registered_operators

    parser.add_argument(
        '--operators',
        nargs='+',
        default=default,
        choices=registered_operators(linear_cost=linear_cost),
        metavar='OPERATOR',
        help='linear attention operators (registered names); default: '
        + (' '.join(default) if default else 'every registered one'),
    )


def operators_or_all(operators):
    """``operators``, or every registered linear-cost operator for None."""
    from mmlvit.models.attentions import registered_operators

    return list(operators or registered_operators(linear_cost=True))


def add_counted_step_arguments(parser):
    """Add the arguments of the tools that count a ViT training step
    without a GPU (``train_memory.py``, ``step_traffic.py``):
    ``--operators``, ``--resolutions``, ``--dtype`` (autocast), ``--arch``
    and ``--depth``; resolve them with :func:`resolve_counted_step`."""
    add_operator_argument(parser)
    parser.add_argument(
        '--resolutions', nargs='+', type=int, default=[224], help='pixels'
    )
    parser.add_argument(
        '--dtype',
        choices=tuple(DTYPES),
        default='bf16',
        help='autocast dtype of the forward (default: %(default)s)',
    )
    parser.add_argument(
        '--arch', default='b', help='ViT arch (zoo name; default: b)'
    )
    parser.add_argument(
        '--depth',
        type=int,
        default=None,
        help="blocks of the whole-model figure (default: the arch's)",
    )


def resolve_counted_step(args):
    """Fill in :func:`add_counted_step_arguments`' defaults (every
    operator, the arch's depth) and set ``args.autocast``: the autocast
    dtype, None for fp32 (no autocast)."""
    from mmpretrain.models import VisionTransformer

    args.operators = operators_or_all(args.operators)
    zoo = VisionTransformer.arch_zoo[args.arch]
    args.depth = args.depth or zoo['num_layers']
    dtype = DTYPES[args.dtype]
    args.autocast = None if dtype == torch.float32 else dtype
    return args


def add_out_dir_argument(parser, default, what='the table, figures and plot'):
    """Add ``--out-dir`` (default ``default``)."""
    parser.add_argument(
        '--out-dir',
        default=default,
        help=f'where {what} go (default: %(default)s)',
    )


def add_memory_worker_argument(parser, choices=None):
    """Add the hidden ``--memory-worker`` (a flag, or one of ``choices``):
    the tool then runs as its own memory worker (see
    :func:`.memory.run_memory_worker`) and prints its figures as JSON."""
    if choices is None:
        parser.add_argument(
            '--memory-worker', action='store_true', help=argparse.SUPPRESS
        )
    else:
        parser.add_argument(
            '--memory-worker', choices=choices, help=argparse.SUPPRESS
        )
