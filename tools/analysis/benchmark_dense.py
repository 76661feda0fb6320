"""Time, peak memory and FLOPs of whole dense models: linear vs softmax ViT-B.

Models: UperNet (MMSegmentation, ``configs/_base_/models/dense/
upernet_lvit-b.py``) and Mask R-CNN with a simple feature pyramid
(MMDetection, ``configs/_base_/models/dense/mask-rcnn_lvit-b_simple-fpn.py``),
each built once per backbone: the config's ``LinearVisionTransformer`` with
``attn_cfg=dict(type=OPERATOR)`` for every linear operator and with
``SoftmaxAttention`` as the reference. Random weights, batch 1, square
(1, 3, px, px) inputs that skip the data preprocessor (normalisation and
padding are no part of the model's cost).

Modes:

- ``train``: the loss mode with synthetic targets (a random ``gt_sem_seg``;
  a few random boxes, labels and box-shaped masks), forward + backward of
  the summed losses, gradients for every parameter. BatchNorm layers use
  their running statistics: UperNet's 1x1 pooled map cannot be normalised
  over a batch of one.
- ``inference``: the predict mode under ``no_grad``. UperNet runs on the
  whole image (``test_cfg.mode='whole'``, not the config's 512-px sliding
  window, which would hide the token count from the backbone); Mask R-CNN
  keeps ``max_per_img`` (100) detections whatever their score
  (``test_cfg.rcnn.score_thr=0``), so that its mask head does the same work
  for every backbone, as random weights would otherwise decide it.

On the CPU every (model, mode, px, backbone) runs in a fresh forked
process (:func:`lab.benchmarks.run_in_child`, as ``benchmark_model.py``):
one warm-up call, then up to ``--repeats`` timed calls within
``--budget-s`` (a warm-up longer than the budget is itself the
measurement); time = the best call; peak memory = the rise of the peak
resident set (VmHWM) during those calls. With ``--device cuda`` every case
runs in this process under autocast (``--dtype``, default bf16): time = the
median of the CUDA-event timings after the warm-up, peak memory =
``torch.cuda.max_memory_allocated`` during one more call minus the memory
allocated before it; an out-of-memory case is listed as failed.
FLOPs are counted during the warm-up by ``torch.utils.flop_counter.
FlopCounterMode`` (:mod:`lab.benchmarks.flops`: matrix products and
convolutions, forward and, in train mode, backward; 2 per multiply-add;
element-wise ops, custom kernels (fla's Triton GLA on CUDA) and mmcv's
RoIAlign and NMS are not counted). Counting costs no extra call:
it adds about 0.3-0.5 s to a Mask R-CNN call (its heads run many small
ops) and nothing measurable to UperNet's, so a counted warm-up longer
than the budget is a fair measurement. Training calls reseed torch, so
every call samples the same anchors and RoIs.

Writes results.json, table.md and benchmark_dense.png to ``--out-dir``
and prints the table: speed-up = softmax time / linear time, FLOP ratio =
softmax FLOPs / linear FLOPs, their quotient (the fraction of the
arithmetic ceiling reached), memory ratio = linear peak / softmax peak.

Example (docs/benchmarks.md, section "Dense models", gives the full
command of its run)::

    python tools/analysis/benchmark_dense.py --threads 1 --repeats 1 \
        --budget-s 20 --out-dir work_dirs/benchmark_dense
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
from lab.benchmarks import dense_models

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DENSE_MODELS = {
    'upernet': dict(
        config='configs/_base_/models/dense/upernet_lvit-b.py', scope='mmseg'
    ),
    'mask-rcnn': dict(
        config='configs/_base_/models/dense/mask-rcnn_lvit-b_simple-fpn.py',
        scope='mmdet',
    ),
}
SOFTMAX = 'SoftmaxAttention'
MODES = ('train', 'inference')
TARGET_PX = 1024
TARGET_FRACTION = 0.7  # speed-up / FLOP ratio


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Time, peak memory and FLOPs of UperNet and Mask R-CNN '
        'with linear vs softmax ViT-B backbones, train and inference.'
    )
    parser.add_argument(
        '--models', nargs='+', choices=list(DENSE_MODELS), default=None
    )
    core.add_operator_argument(
        parser, default=['GatedLinearAttention', 'ReLULinearAttention']
    )
    parser.add_argument(
        '--modes', nargs='+', choices=MODES, default=list(MODES)
    )
    parser.add_argument(
        '--train-resolutions', nargs='+', type=int, default=[512, 1024]
    )
    parser.add_argument(
        '--infer-resolutions',
        nargs='+',
        type=int,
        default=[512, 1024, 1536, 2048],
    )
    parser.add_argument(
        '--skip',
        nargs='+',
        default=[],
        metavar='MODEL:MODE:PX[:REASON]',
        help='cases not to run (every backbone), listed as skipped '
        '(with the reason if given)',
    )
    parser.add_argument(
        '--case-timeout-s',
        type=float,
        default=None,
        help='stop a case after this long and list it as skipped',
    )
    core.add_timing_arguments(parser, threads=1)
    core.add_device_arguments(parser)
    core.add_out_dir_argument(parser, 'work_dirs/benchmark_dense')
    args = core.check_device_arguments(parser, parser.parse_args(argv))
    args.models = args.models or list(DENSE_MODELS)
    return args


def build_dense_model(name, operator, cfg_options=None):
    """The dense model ``name`` (a key of ``DENSE_MODELS``) with every
    backbone block's attention ``operator``, random weights (see
    :func:`lab.benchmarks.dense_models.build_dense_model`)."""
    spec = DENSE_MODELS[name]
    config = osp.join(REPO_ROOT, spec['config'])
    return dense_models.build_dense_model(
        config, spec['scope'], operator, cfg_options
    )


def model_step(model, name, mode, size, device='cpu', dtype='fp32'):
    """The call to time (see :func:`lab.benchmarks.dense_models.
    dense_step`)."""
    scope = DENSE_MODELS[name]['scope']
    return dense_models.dense_step(model, scope, mode, size, device, dtype)


def measure_case(case, args, cfg_options=None):
    """One (model, mode, px, backbone) case.

    Returns:
        dict: ``times``, ``warm_up_s`` (the counted call), ``peak_mib``,
        ``seconds`` (best time on the CPU, median on CUDA) and ``flops``.
    """
    name, mode, size, operator = case[0], case[1], int(case[2]), case[3]
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build_dense_model(name, operator, cfg_options).to(args.device)
    step = model_step(model, name, mode, size, args.device, args.dtype)
    step = core.FlopCountedStep(step)
    result = core.measure_step(step, args.repeats, args.budget_s, args.device)
    result['seconds'] = core.steady_seconds(result['times'], args.device)
    result['flops'] = step.flops
    return result


def resolutions(args, mode):
    return (
        args.train_resolutions if mode == 'train' else args.infer_resolutions
    )


def ratio_rows(results):
    """One row per measured case, with its ratios to the softmax model of
    the same (model, mode, px); ``status`` is 'ok', 'skipped: ...' or
    'failed: ...'."""
    rows = core.ratio_rows(
        results,
        ('model', 'mode', 'px', 'backbone'),
        SOFTMAX,
        lambda res: dict(seconds=res['seconds'], gflop=res['flops'] / 1e9,
                         peak_mib=res['peak_mib'], runs=len(res['times'])),
    )  # fmt: skip
    for row in rows:
        row['px'] = int(row['px'])
    return rows


def table(rows):
    columns = [
        ('model', 'model', '{}', '-'),
        ('mode', 'mode', '{}', '-'),
        ('px', 'px', '{}'),
        ('backbone', 'backbone', '{}', '-'),
        ('time (s)', 'seconds', '{:.3g}'),
        ('GFLOP', 'gflop', core.gflop_text),
        ('peak MiB', 'peak_mib', '{:.0f}'),
        ('speed-up', 'speedup', '{:.2f}x'),
        ('FLOP ratio', 'flop_ratio', '{:.2f}'),
        ('speed-up / FLOP ratio', 'fraction_of_flop_ratio',
         lambda fraction: f'{100 * fraction:.0f} %'),
        ('memory ratio', 'memory_ratio', '{:.2f}'),
    ]  # fmt: skip
    return '\n'.join(core.column_table(columns, rows, keys=4))


def target_verdicts(rows):
    """At TARGET_PX, every linear model's speed-up should reach
    TARGET_FRACTION of its FLOP ratio."""
    return [
        core.flop_ceiling_verdict(
            f'{row["model"]} {row["mode"]} {row["px"]} px {row["backbone"]}',
            row,
            TARGET_FRACTION,
        )
        for row in rows
        if row['backbone'] != SOFTMAX and row['px'] == TARGET_PX
    ]


def plot(rows, path):
    """Time against input size, one panel per (model, mode), one line per
    backbone; log-log."""
    names = list(dict.fromkeys(r['model'] for r in rows))
    modes = [m for m in MODES if any(r['mode'] == m for r in rows)]
    panels = []
    for name in names:
        for mode in modes:
            panel = [
                r for r in rows if (r['model'], r['mode']) == (name, mode)
            ]
            series = {}
            for r in panel:
                points = series.setdefault(r['backbone'], [])
                if r['status'] == 'ok':
                    points.append((r['px'], r['seconds']))
            panels.append(
                dict(series=series, styles={SOFTMAX: dict(linestyle='--')},
                     title=f'{name}, {mode}', xlabel='input size (px)',
                     ylabel='time per image (s)',
                     sizes=sorted({r['px'] for r in panel}))
            )  # fmt: skip
    core.plots.line_panels(path, panels, columns=len(modes))


def skip_reason(case, args):
    """The reason ``--skip`` gives for a case, or None."""
    for entry in args.skip:
        fields = entry.split(':', 3)
        if fields[:3] == list(case[:3]):
            return fields[3] if len(fields) > 3 else '--skip'
    return None


def summary(res):
    return (
        f'{res["seconds"]:.3g} s, {core.gflop_text(res["flops"] / 1e9)} '
        f'GFLOP, {res["peak_mib"]:.0f} MiB, {len(res["times"])} runs'
    )


def main(argv=None, cfg_options=None):
    """Run the grid; returns the table rows.

    Args:
        argv (list[str], optional): Command-line arguments.
        cfg_options (dict, optional): Model name -> dotted config keys ->
            values, merged into that model's config (used by the tests for
            a tiny backbone).
    """
    args = parse_args(argv)
    cfg_options = cfg_options or {}
    mkdir_or_exist(args.out_dir)
    for name in args.models:  # before the forks
        dense_models.scope_registry(DENSE_MODELS[name]['scope'])
    cases = [
        (name, mode, str(size), operator)
        for name in args.models
        for mode in args.modes
        for size in resolutions(args, mode)
        for operator in [SOFTMAX] + args.operators
    ]
    json_path = osp.join(args.out_dir, 'results.json')
    results = core.run_grid(
        cases,
        lambda case: measure_case(case, args, cfg_options.get(case[0])),
        args,
        json_path,
        describe=lambda case: '{} {} {}px {}'.format(*case),
        summary=summary,
        timeout_s=args.case_timeout_s,
        skip=lambda case: skip_reason(case, args),
    )
    rows = ratio_rows(results)
    core.write_json(
        json_path, dict(config=vars(args), results=results, rows=rows)
    )
    core.write_table(
        osp.join(args.out_dir, 'table.md'), table(rows), target_verdicts(rows)
    )
    plot(rows, osp.join(args.out_dir, 'benchmark_dense.png'))
    return rows


if __name__ == '__main__':
    main()
