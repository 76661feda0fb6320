"""Cost of a distilled training step against a plain student step.

A DeiT-S student (LinearVisionTransformer with ``GatedLinearAttention``, or
``ReLULinearAttention`` when GLA is not registered) and a DeiT-S softmax
teacher (random weights, written to a temporary checkpoint) at 224 px.
Both steps are a full ``train_step`` (preprocessing, forward, backward,
AdamW update) on the same batch: the plain one on the student alone, the
distilled one through ``AttentionDistiller`` (teacher forward without
gradients, attention-output MSE at every block). The teacher's forward pass
alone is timed too: the distilled step should cost about the student step
plus that. Wall and CPU time (``time.process_time``, all threads of the
process; less sensitive than wall time to other work on a shared machine)
are medians over ``--repeats`` rounds after one warm-up call, the three
taking turns in each round so that load from elsewhere hits them alike.

Peak memory is the growth of the resident set during one step after a
warm-up (Linux ``VmHWM`` minus ``VmRSS`` after resetting the high-water mark
through ``/proc/self/clear_refs``), in a separate process per step kind
started with ``MALLOC_MMAP_THRESHOLD_`` at 64 KiB so that freed tensors
leave the resident set. It counts activations, saved tensors, gradients and
optimizer state updates, not the weights.

With ``--device cuda`` everything runs in this process under autocast
(``--dtype``, default bf16; a plain optimizer wrapper, no loss scaling):
the first call of each step is timed apart, the rounds by CUDA events
(wall time only), and peak memory is ``torch.cuda.max_memory_allocated``
during one step after ``reset_peak_memory_stats``, minus the memory
allocated before it.

Example:
    python tools/analysis/benchmark_distill.py --batch-size 8 --repeats 5
    python tools/analysis/benchmark_distill.py --device cuda --batch-size 64
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from mmengine.optim import OptimWrapper
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import mmlvit  # noqa: F401  (registers the modules)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab.benchmarks import (
    add_device_arguments,
    add_memory_worker_argument,
    autocast,
    check_device_arguments,
    describe_device,
    interleaved_times,
    peak_growth_mib,
    run_memory_worker,
)

TARGET_TIME_RATIO = 1.4
KINDS = ('student', 'distilled')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument(
        '--repeats',
        type=int,
        default=5,
        help='timed rounds (one step of each kind per round)',
    )
    parser.add_argument(
        '--threads',
        type=int,
        default=None,
        help='torch CPU threads (default: torch default)',
    )
    parser.add_argument(
        '--operator',
        default=None,
        help='student attention operator (default: '
        'GatedLinearAttention, else ReLULinearAttention)',
    )
    add_device_arguments(parser)
    add_memory_worker_argument(parser, choices=KINDS)
    return check_device_arguments(parser, parser.parse_args(argv))


def default_operator():
    if MODELS.get('GatedLinearAttention') is not None:
        return 'GatedLinearAttention'
    return 'ReLULinearAttention'


def classifier_cfg(backbone):
    return dict(
        type='ImageClassifier',
        backbone=dict(
            arch='deit-small', img_size=224, patch_size=16, **backbone
        ),
        head=dict(
            type='VisionTransformerClsHead', num_classes=1000, in_channels=384
        ),
        data_preprocessor=dict(
            num_classes=1000,
            mean=[123.675, 116.28, 103.53],
            std=[58.395, 57.12, 57.375],
            to_rgb=True,
        ),
    )


def build_steps(operator, batch_size, tmp_dir, device='cpu', dtype='fp32'):
    """{kind: zero-argument callable running one train_step}."""
    torch.manual_seed(0)
    teacher_cfg = classifier_cfg(dict(type='VisionTransformer'))
    teacher_ckpt = os.path.join(tmp_dir, 'teacher.pth')
    torch.save(
        dict(state_dict=MODELS.build(teacher_cfg).state_dict()), teacher_ckpt
    )
    distiller = (
        MODELS.build(
            dict(
                type='AttentionDistiller',
                student=classifier_cfg(
                    dict(
                        type='LinearVisionTransformer',
                        attn_cfg=dict(type=operator),
                    )
                ),
                teacher=teacher_cfg,
                teacher_checkpoint=teacher_ckpt,
            )
        )
        .train()
        .to(device)
    )
    optim = OptimWrapper(
        torch.optim.AdamW(
            [p for p in distiller.parameters() if p.requires_grad], lr=1e-4
        )
    )
    images = [
        torch.randint(0, 256, (3, 224, 224), dtype=torch.uint8)
        for _ in range(batch_size)
    ]
    samples = [DataSample().set_gt_label(i % 1000) for i in range(batch_size)]

    def step(model):
        def train_step():
            with autocast(device, dtype):
                model.train_step(
                    dict(inputs=images, data_samples=samples), optim
                )

        return train_step

    def teacher_forward():
        data = distiller.data_preprocessor(dict(inputs=images), True)
        with torch.no_grad(), autocast(device, dtype):
            distiller.teacher(data['inputs'], mode='tensor')

    return dict(
        student=step(distiller.student),
        distilled=step(distiller),
        teacher=teacher_forward,
    )


def median_times(steps, repeats, device='cpu'):
    """{kind: (wall s, CPU s, first call s)}: medians over ``repeats``
    rounds after one first call each; the callables take turns within a
    round."""
    times = interleaved_times(steps, repeats, device)
    return {
        kind: (t['median_s'], statistics.median(t['cpu']), t['first_s'])
        for kind, t in times.items()
    }


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    operator = args.operator or default_operator()
    with tempfile.TemporaryDirectory() as tmp_dir:
        steps = build_steps(
            operator, args.batch_size, tmp_dir, args.device, args.dtype
        )
        if args.memory_worker:
            print(json.dumps(peak_growth_mib(steps[args.memory_worker])))
            return 0
        times = median_times(steps, args.repeats, args.device)
        if args.device == 'cuda':
            memory = {
                kind: peak_growth_mib(steps[kind], args.device)
                for kind in KINDS
            }
    if args.device == 'cpu':
        memory = {
            kind: run_memory_worker(__file__, [*argv, '--memory-worker', kind])
            for kind in KINDS
        }
    print('\n'.join(render(args, operator, times, memory)))
    return 0


def render(args, operator, times, memory):
    """The result as Markdown lines."""
    wall_ratio, cpu_ratio = (
        times['distilled'][i] / times['student'][i] for i in (0, 1)
    )
    memory_ratio = memory['distilled'] / memory['student']

    def verdict(ratio):
        return 'met' if ratio <= TARGET_TIME_RATIO else 'MISSED'

    if args.device == 'cuda':
        return render_cuda(args, operator, times, memory, verdict)
    return [
        f'DeiT-S {operator} student, softmax teacher, 224 px, batch '
        f'{args.batch_size}, {torch.get_num_threads()} CPU threads, median '
        f'of {args.repeats}',
        '',
        '| step | wall time (s) | CPU time (s) | peak memory growth (MiB) |',
        '|---|---|---|---|',
        f'| student alone | {times["student"][0]:.2f} | '
        f'{times["student"][1]:.2f} | {memory["student"]:.0f} |',
        f'| distilled | {times["distilled"][0]:.2f} | '
        f'{times["distilled"][1]:.2f} | {memory["distilled"]:.0f} |',
        f'| ratio | {wall_ratio:.2f}x | {cpu_ratio:.2f}x | '
        f'{memory_ratio:.2f}x |',
        f'| teacher forward alone (no grad) | {times["teacher"][0]:.2f} | '
        f'{times["teacher"][1]:.2f} | |',
        '',
        f'Time ratio (target <= {TARGET_TIME_RATIO}x): wall '
        f'{wall_ratio:.2f}x {verdict(wall_ratio)}, CPU {cpu_ratio:.2f}x '
        f'{verdict(cpu_ratio)}.',
    ]


def render_cuda(args, operator, times, memory, verdict):
    """The CUDA result as Markdown lines (wall time by CUDA events; the
    first call, with compilation, apart)."""
    wall_ratio = times['distilled'][0] / times['student'][0]
    memory_ratio = memory['distilled'] / memory['student']
    rows = [
        ('student alone', 'student'),
        ('distilled', 'distilled'),
        ('teacher forward alone (no grad)', 'teacher'),
    ]
    lines = [
        f'DeiT-S {operator} student, softmax teacher, 224 px, batch '
        f'{args.batch_size}, {describe_device(args.device, args.dtype)}, '
        f'median of {args.repeats}',
        '',
        '| step | time (ms) | first call (s) | peak memory growth (MiB) |',
        '|---|---:|---:|---:|',
    ]
    for label, kind in rows:
        mib = f'{memory[kind]:.0f}' if kind in memory else ''
        lines.append(
            f'| {label} | {1e3 * times[kind][0]:.1f} | '
            f'{times[kind][2]:.2f} | {mib} |'
        )
    lines.insert(-1, f'| ratio | {wall_ratio:.2f}x | | {memory_ratio:.2f}x |')
    return lines + [
        '',
        f'Time ratio (target <= {TARGET_TIME_RATIO}x): {wall_ratio:.2f}x '
        f'{verdict(wall_ratio)}.',
    ]


if __name__ == '__main__':
    sys.exit(main())
