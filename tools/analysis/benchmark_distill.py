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

Example:
    python tools/analysis/benchmark_distill.py --batch-size 8 --repeats 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from mmengine.optim import OptimWrapper
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import mmlvit  # noqa: F401  (registers the modules)
from mmlvit.utils import peak_resident_growth_mib

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
    parser.add_argument(
        '--memory-worker', choices=KINDS, help=argparse.SUPPRESS
    )
    return parser.parse_args(argv)


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


def build_steps(operator, batch_size, tmp_dir):
    """{kind: zero-argument callable running one train_step}."""
    torch.manual_seed(0)
    teacher_cfg = classifier_cfg(dict(type='VisionTransformer'))
    teacher_ckpt = os.path.join(tmp_dir, 'teacher.pth')
    torch.save(
        dict(state_dict=MODELS.build(teacher_cfg).state_dict()), teacher_ckpt
    )
    distiller = MODELS.build(
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
    ).train()
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
        return lambda: model.train_step(
            dict(inputs=images, data_samples=samples), optim
        )

    def teacher_forward():
        data = distiller.data_preprocessor(dict(inputs=images), True)
        with torch.no_grad():
            distiller.teacher(data['inputs'], mode='tensor')

    return dict(
        student=step(distiller.student),
        distilled=step(distiller),
        teacher=teacher_forward,
    )


def median_times(steps, repeats):
    """{kind: (wall s, CPU s)}: medians over ``repeats`` rounds after one
    warm-up call each; the callables take turns within a round."""
    for step in steps.values():
        step()
    times = {kind: [] for kind in steps}
    for _ in range(repeats):
        for kind, step in steps.items():
            wall, cpu = time.perf_counter(), time.process_time()
            step()
            times[kind].append(
                (time.perf_counter() - wall, time.process_time() - cpu)
            )
    return {
        kind: tuple(statistics.median(t[i] for t in ts) for i in (0, 1))
        for kind, ts in times.items()
    }


def measure_memory(kind, argv):
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_='65536')
    out = subprocess.run(
        [
            sys.executable,
            os.path.abspath(__file__),
            *argv,
            '--memory-worker',
            kind,
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    operator = args.operator or default_operator()
    with tempfile.TemporaryDirectory() as tmp_dir:
        steps = build_steps(operator, args.batch_size, tmp_dir)
        if args.memory_worker:
            print(
                json.dumps(peak_resident_growth_mib(steps[args.memory_worker]))
            )
            return 0
        times = median_times(steps, args.repeats)
    memory = {kind: measure_memory(kind, argv) for kind in KINDS}
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


if __name__ == '__main__':
    sys.exit(main())
