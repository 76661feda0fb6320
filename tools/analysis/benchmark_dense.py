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
process (:func:`mmlvit.benchmark.run_in_child`, as ``benchmark_model.py``):
one warm-up call, then up to ``--repeats`` timed calls within
``--budget-s`` (a warm-up longer than the budget is itself the
measurement); time = the best call; peak memory = the rise of the peak
resident set (VmHWM) during those calls. With ``--device cuda`` every case
runs in this process under autocast (``--dtype``, default bf16): time = the
median of the CUDA-event timings after the warm-up, peak memory =
``torch.cuda.max_memory_allocated`` during one more call minus the memory
allocated before it; an out-of-memory case is listed as failed.
FLOPs are counted during the warm-up by ``torch.utils.flop_counter.
FlopCounterMode`` (:mod:`mmlvit.benchmark.flops`: matrix products and
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

import torch
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import DefaultScope
from mmengine.utils import mkdir_or_exist
from torch.nn.modules.batchnorm import _BatchNorm

import mmlvit  # noqa: F401
from mmlvit.benchmark import (
    FlopCountedStep,
    add_device_arguments,
    add_timing_arguments,
    autocast,
    check_device_arguments,
    compare,
    markdown_table,
    measure_step,
    plots,
    run_grid,
    status,
    steady_seconds,
    verdict,
    write_json,
)
from mmlvit.models.attentions import registered_operators

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
    parser.add_argument(
        '--operators',
        nargs='+',
        default=['GatedLinearAttention', 'ReLULinearAttention'],
        choices=registered_operators(linear_cost=True),
        metavar='OPERATOR',
        help='linear attention operators (registered names)',
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
    add_timing_arguments(parser, threads=1)
    add_device_arguments(parser)
    parser.add_argument('--out-dir', default='work_dirs/benchmark_dense')
    args = check_device_arguments(parser, parser.parse_args(argv))
    args.models = args.models or list(DENSE_MODELS)
    return args


def scope_registry(scope):
    """The ``MODELS`` registry of ``'mmseg'`` or ``'mmdet'``, with that
    package's models registered (import it before forking the cases)."""
    if scope == 'mmseg':
        import mmseg.models  # noqa: F401
        from mmseg.registry import MODELS
    else:
        import mmdet.models  # noqa: F401
        from mmdet.registry import MODELS
    return MODELS


def build_dense_model(name, operator, cfg_options=None):
    """The dense model ``name`` with every backbone block's attention
    ``operator``, random weights, SyncBN reverted to BN.

    Args:
        name (str): A key of ``DENSE_MODELS``.
        operator (str): A registered attention operator.
        cfg_options (dict, optional): Dotted config keys -> values, merged
            into the config (e.g. a smaller backbone arch for tests).
    """
    spec = DENSE_MODELS[name]
    cfg = Config.fromfile(osp.join(REPO_ROOT, spec['config']))
    cfg.merge_from_dict(cfg_options or {})
    cfg.model.backbone.attn_cfg = dict(type=operator)
    if spec['scope'] == 'mmseg':
        cfg.model.test_cfg = dict(mode='whole')
    else:
        cfg.model.test_cfg.rcnn.score_thr = 0.0
    MODELS = scope_registry(spec['scope'])
    with DefaultScope.overwrite_default_scope(spec['scope']):
        model = MODELS.build(cfg.model)
    return revert_sync_batchnorm(model)


def seg_samples(size, num_classes, generator):
    """One ``SegDataSample`` with a random (1, size, size) label map."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    shape = (size, size)
    sample = SegDataSample(
        metainfo=dict(
            img_shape=shape,
            ori_shape=shape,
            pad_shape=shape,
            padding_size=[0, 0, 0, 0],
        )
    )
    labels = torch.randint(num_classes, (1, *shape), generator=generator)
    sample.gt_sem_seg = PixelData(data=labels)
    return [sample]


def det_samples(size, num_classes, generator, num_boxes=5):
    """One ``DetDataSample`` with ``num_boxes`` random boxes (5-50 % of the
    image side), labels and box-shaped ``BitmapMasks`` (n, size, size)."""
    import numpy as np
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData

    shape = (size, size)
    sample = DetDataSample(
        metainfo=dict(
            img_shape=shape,
            ori_shape=shape,
            pad_shape=shape,
            batch_input_shape=shape,
            scale_factor=(1.0, 1.0),
        )
    )
    wh = (0.05 + 0.45 * torch.rand(num_boxes, 2, generator=generator)) * size
    xy = torch.rand(num_boxes, 2, generator=generator) * (size - wh)
    boxes = torch.cat([xy, xy + wh], dim=1).floor()
    masks = np.zeros((num_boxes, size, size), dtype=np.uint8)
    for mask, (x0, y0, x1, y1) in zip(masks, boxes.int().tolist()):
        mask[y0:y1, x0:x1] = 1
    sample.gt_instances = InstanceData(
        bboxes=boxes,
        labels=torch.randint(num_classes, (num_boxes,), generator=generator),
        masks=BitmapMasks(masks, size, size),
    )
    return [sample]


def model_step(model, name, mode, size, device='cpu', dtype='fp32'):
    """The call to time: ``train`` (loss, backward) or ``inference``
    (predict, no grad) on a (1, 3, size, size) image, under autocast of
    ``dtype``."""
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(1, 3, size, size, generator=generator).to(device)
    if DENSE_MODELS[name]['scope'] == 'mmseg':
        samples = seg_samples(size, model.num_classes, generator)
    else:
        num_classes = model.roi_head.bbox_head.num_classes
        samples = det_samples(size, num_classes, generator)
    samples = [sample.to(device) for sample in samples]

    def train():
        model.zero_grad(set_to_none=True)
        torch.manual_seed(0)  # the same sampled RoIs in every call
        with autocast(device, dtype):
            losses = model(images, samples, mode='loss')
        model.parse_losses(losses)[0].backward()

    def inference():
        with torch.no_grad(), autocast(device, dtype):
            model(images, samples, mode='predict')

    model.train(mode == 'train')
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.eval()
    return train if mode == 'train' else inference


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
    step = FlopCountedStep(step)
    result = measure_step(step, args.repeats, args.budget_s, args.device)
    result['seconds'] = steady_seconds(result['times'], args.device)
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
    rows = []
    for name, per_mode in results.items():
        for mode, per_size in per_mode.items():
            for size, per_backbone in per_size.items():
                ref = per_backbone.get(SOFTMAX, {})
                for backbone, res in per_backbone.items():
                    row = dict(model=name, mode=mode, px=int(size))
                    row.update(backbone=backbone, status=status(res))
                    if row['status'] == 'ok':
                        row.update(
                            seconds=res['seconds'],
                            gflop=res['flops'] / 1e9,
                            peak_mib=res['peak_mib'],
                            runs=len(res['times']),
                        )
                        if 'seconds' in ref:
                            row.update(compare(res, ref))
                    rows.append(row)
    return rows


def gflop_text(gflop):
    return f'{gflop:.0f}' if gflop >= 100 else f'{gflop:.3g}'


def table(rows):
    header = ['model', 'mode', 'px', 'backbone', 'time (s)', 'GFLOP']
    header += ['peak MiB', 'speed-up', 'FLOP ratio', 'speed-up / FLOP ratio']
    header += ['memory ratio']
    lines = []
    for row in rows:
        cells = [row['model'], row['mode'], str(row['px']), row['backbone']]
        if row['status'] != 'ok':
            cells += [row['status']] + [''] * 6
        else:
            cells += [
                f'{row["seconds"]:.3g}',
                gflop_text(row['gflop']),
                f'{row["peak_mib"]:.0f}',
            ]
            if 'speedup' in row:
                cells += [
                    f'{row["speedup"]:.2f}x',
                    f'{row["flop_ratio"]:.2f}',
                    f'{100 * row["fraction_of_flop_ratio"]:.0f} %',
                    f'{row["memory_ratio"]:.2f}',
                ]
            else:
                cells += ['-'] * 4
        lines.append(cells)
    align = '|---|---|---:|---|' + '---:|' * 7
    return '\n'.join(markdown_table(header, lines, align))


def target_verdicts(rows):
    """At TARGET_PX, every linear model's speed-up should reach
    TARGET_FRACTION of its FLOP ratio."""
    verdicts = []
    for row in rows:
        if row['backbone'] == SOFTMAX or row['px'] != TARGET_PX:
            continue
        case = f'{row["model"]} {row["mode"]} {row["px"]} px {row["backbone"]}'
        if 'speedup' not in row:
            verdicts.append(f'n/a    {case}: {row["status"]}')
            continue
        fraction = row['fraction_of_flop_ratio']
        verdicts.append(
            verdict(
                fraction >= TARGET_FRACTION,
                case,
                f'speed-up {row["speedup"]:.2f}x, FLOP ratio '
                f'{row["flop_ratio"]:.2f}, {100 * fraction:.0f} % of it '
                f'(target >= {100 * TARGET_FRACTION:.0f} %)',
            )
        )
    return verdicts


def plot(rows, path):
    """Time against input size, one panel per (model, mode), one line per
    backbone; log-log."""
    plt = plots.pyplot()
    from matplotlib.ticker import LogLocator, ScalarFormatter

    names = list(dict.fromkeys(r['model'] for r in rows))
    modes = [m for m in MODES if any(r['mode'] == m for r in rows)]
    fig, axes = plt.subplots(
        len(names),
        len(modes),
        figsize=(5.5 * len(modes), 4 * len(names)),
        squeeze=False,
    )
    panels = [(name, mode) for name in names for mode in modes]
    for ax, (name, mode) in zip(axes.flat, panels):
        panel = [r for r in rows if (r['model'], r['mode']) == (name, mode)]
        for backbone in dict.fromkeys(r['backbone'] for r in panel):
            points = [
                (r['px'], r['seconds'])
                for r in panel
                if r['backbone'] == backbone and r['status'] == 'ok'
            ]
            if points:
                style = '--' if backbone == SOFTMAX else '-'
                ax.plot(*zip(*points), style, marker='o', label=backbone)
        ax.set_yscale('log')
        sizes = sorted({r['px'] for r in panel})
        plots.log2_size_axes(ax, sizes, f'{name}, {mode}', 'input size (px)',
                             'time per image (s)')  # fmt: skip
        ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        ax.yaxis.set_minor_formatter(ScalarFormatter())
        if ax.lines:
            ax.legend(fontsize=8)
    plots.save(fig, path)


def skip_reason(case, args):
    """The reason ``--skip`` gives for a case, or None."""
    for entry in args.skip:
        fields = entry.split(':', 3)
        if fields[:3] == list(case[:3]):
            return fields[3] if len(fields) > 3 else '--skip'
    return None


def summary(res):
    return (
        f'{res["seconds"]:.3g} s, {gflop_text(res["flops"] / 1e9)} GFLOP, '
        f'{res["peak_mib"]:.0f} MiB, {len(res["times"])} runs'
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
    for name in args.models:
        scope_registry(DENSE_MODELS[name]['scope'])  # before the forks
    cases = [
        (name, mode, str(size), operator)
        for name in args.models
        for mode in args.modes
        for size in resolutions(args, mode)
        for operator in [SOFTMAX] + args.operators
    ]
    json_path = osp.join(args.out_dir, 'results.json')
    results = run_grid(
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
    text = table(rows)
    verdicts = target_verdicts(rows)
    write_json(json_path, dict(config=vars(args), results=results, rows=rows))
    with open(osp.join(args.out_dir, 'table.md'), 'w') as f:
        f.write(text + '\n\n' + '\n'.join(verdicts) + '\n')
    plot(rows, osp.join(args.out_dir, 'benchmark_dense.png'))
    print(text)
    print('\n'.join(verdicts))
    return rows


if __name__ == '__main__':
    main()
