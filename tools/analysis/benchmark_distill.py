"""Cost of a distilled training step against a plain student step.

A DeiT-S student (LinearVisionTransformer with ``GatedLinearAttention``, or
``ReLULinearAttention`` when GLA is not registered) and a DeiT-S softmax
teacher (random weights, written to a temporary checkpoint) at 224 px.
Both steps are a full ``train_step`` (preprocessing, forward, backward,
AdamW update) on the same batch: the plain one on the student alone, the
distilled one through ``AttentionDistiller`` (teacher forward without
gradients, attention-output MSE at every block). Time is the median over
``--repeats`` rounds after one warm-up step, the two steps taking turns in
each round.

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
import re
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

    return dict(student=step(distiller.student), distilled=step(distiller))


def median_seconds(steps, repeats):
    for step in steps.values():
        step()
    times = {kind: [] for kind in steps}
    for _ in range(repeats):
        for kind, step in steps.items():
            start = time.perf_counter()
            step()
            times[kind].append(time.perf_counter() - start)
    return {kind: statistics.median(ts) for kind, ts in times.items()}


def _status_kib(key):
    with open('/proc/self/status') as f:
        return int(re.search(rf'{key}:\s+(\d+) kB', f.read()).group(1))


def peak_growth_mib(step):
    step()
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')  # reset VmHWM to the current VmRSS
    before = _status_kib('VmRSS')
    step()
    return (_status_kib('VmHWM') - before) / 1024


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
            print(json.dumps(peak_growth_mib(steps[args.memory_worker])))
            return 0
        seconds = median_seconds(steps, args.repeats)
    memory = {kind: measure_memory(kind, argv) for kind in KINDS}

    time_ratio = seconds['distilled'] / seconds['student']
    memory_ratio = memory['distilled'] / memory['student']
    lines = [
        f'DeiT-S {operator} student, softmax teacher, 224 px, batch '
        f'{args.batch_size}, {torch.get_num_threads()} CPU threads, median '
        f'of {args.repeats}',
        '',
        '| step | time (s) | peak memory growth (MiB) |',
        '|---|---|---|',
        f'| student alone | {seconds["student"]:.3f} | '
        f'{memory["student"]:.0f} |',
        f'| distilled | {seconds["distilled"]:.3f} | '
        f'{memory["distilled"]:.0f} |',
        f'| ratio | {time_ratio:.2f}x | {memory_ratio:.2f}x |',
        '',
        f'Time ratio {time_ratio:.2f}x: target <= {TARGET_TIME_RATIO}x '
        f'{"met" if time_ratio <= TARGET_TIME_RATIO else "MISSED"}.',
    ]
    print('\n'.join(lines))
    return 0


if __name__ == '__main__':
    sys.exit(main())
