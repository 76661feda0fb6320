"""Where a ViT's step spends its time: the longest kernels (CUDA) or
operators (CPU) of one step of the softmax ViT and of each linear ViT.

Every model (mmpretrain's softmax ``VisionTransformer`` and a
``LinearVisionTransformer`` per operator, as in benchmark_model.py) takes
one step to warm up (compilation, autotuning), then one step under
``torch.profiler``: forward + backward (loss = sum of the features) or,
with ``--mode forward``, forward without grad; under autocast (``--dtype``,
bf16 by default on CUDA). On CUDA each kernel's time on the GPU, on the CPU
each operator's own time (its children's not included), with its share of
the step's total; the ``--top`` longest are listed, the rest summed.

Writes profile.md and profile.json to ``--out-dir``.

Example::

    python tools/analysis/profile_step.py --device cuda \\
        --resolution 224 --batch-size 128 --out-dir work_dirs/profile
"""

import argparse
import os.path as osp
import sys
from pathlib import Path

import torch
from mmengine.utils import mkdir_or_exist

import mmlvit  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab import benchmarks as core
from lab.benchmarks import vit_models
from lab.benchmarks.profiling import self_times, short_name, top_rows
from lab.benchmarks.vit_models import SOFTMAX

MODES = ('forward+backward', 'forward')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='The longest kernels (CUDA) or operators (CPU) of one '
        'step of the softmax ViT and of each linear ViT.'
    )
    core.add_operator_argument(parser)
    parser.add_argument('--resolution', type=int, default=224)
    parser.add_argument('--batch-size', type=int, default=1)
    parser.add_argument('--arch', default='b', help='ViT arch (zoo name)')
    parser.add_argument('--mode', choices=MODES, default=MODES[0])
    parser.add_argument(
        '--top', type=int, default=12, help='entries listed per model'
    )
    core.add_device_arguments(parser)
    core.add_out_dir_argument(parser, 'work_dirs/profile_step')
    args = core.check_device_arguments(parser, parser.parse_args(argv))
    args.models = [SOFTMAX] + core.operators_or_all(args.operators)
    return args


def model_step(name, args):
    """One step of model ``name`` as a callable (:func:`vit_models.model_step
    <lab.benchmarks.vit_models.model_step>`)."""
    training = args.mode == 'forward+backward'
    return vit_models.model_step(
        name, args.arch, args.resolution, args.batch_size, args.device,
        args.dtype, training,
    )  # fmt: skip


def profile_model(name, args):
    """The model's warm-up time and its entries (see :func:`self_times`)."""
    step = model_step(name, args)
    warm_up_s = core.first_call_seconds(step, args.device)
    entries = self_times(step, args.device)
    return dict(warm_up_s=warm_up_s, entries=entries)


def model_table(name, result, top):
    """Markdown lines of one model: its total and its longest entries."""
    entries = result['entries']
    total = sum(entry['ms'] for entry in entries)
    lines = [
        f'### {name}: {total:.2f} ms in all (warm-up call '
        f'{result["warm_up_s"]:.2f} s)',
        '',
    ]
    rows = [
        [short_name(row['name']), str(row['calls']), f'{row["ms"]:.3f}',
         f'{100 * row["share"]:.1f} %']
        for row in top_rows(entries, top)
    ]  # fmt: skip
    header = ['kernel or operator', 'calls', 'ms', 'share']
    return lines + core.markdown_table(header, rows, '-:::')


def main(argv=None):
    args = parse_args(argv)
    mkdir_or_exist(args.out_dir)
    what = 'kernels on the GPU' if args.device == 'cuda' else 'CPU operators'
    lines = [
        f'One {args.mode} step at {args.resolution} px, batch '
        f'{args.batch_size}, ViT-{args.arch}; '
        f'{core.describe_device(args.device, args.dtype)}; {what}, by '
        'their own time.',
    ]
    results = {}
    deadline = core.Deadline(args.max_seconds)
    for name in args.models:
        if deadline.expired():
            lines += ['', f'### {name}: skipped (--max-seconds)']
            continue
        print(f'[profile_step] {name} ...', flush=True)
        try:
            results[name] = profile_model(name, args)
        except Exception as e:  # the others still run
            if args.device == 'cuda':
                torch.cuda.empty_cache()
            lines += ['', f'### {name}: failed: {type(e).__name__}: {e}']
            continue
        lines += [''] + model_table(name, results[name], args.top)
        core.write_json(osp.join(args.out_dir, 'profile.json'), results)
    core.write_json(osp.join(args.out_dir, 'profile.json'), results)
    core.write_table(
        osp.join(args.out_dir, 'profile.md'), '\n'.join(lines), []
    )
    return results


if __name__ == '__main__':
    main()
