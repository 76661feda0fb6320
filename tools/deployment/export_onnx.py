"""Export a trained classifier (or a distiller's student) to ONNX.

The graph maps an image batch (B, C, H, W), float pixels 0-255 in the
channel order of the config's test pipeline, to class scores
(B, num_classes): the data preprocessor's normalisation, the model and the
softmax, with a dynamic batch size and the spatial size fixed (export once
per size). The graph is then run in onnxruntime on a batch of another size
and compared with PyTorch; ``--latency`` also times both.

Example:
    python tools/deployment/export_onnx.py \\
        configs/fashion_mnist/vit-tiny-p4_softmax_fashion-mnist.py \\
        --checkpoint checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth \\
        --out work_dirs/deploy/vit-tiny.onnx
"""

import argparse
import logging
import os.path as osp
import time

import torch
from mmengine.logging import MMLogger, print_log

import mmlvit  # noqa: F401  (registers the operators, safe loading)
from mmlvit.deployment import (
    DeployableClassifier,
    OperatorExportError,
    compare_with_onnxruntime,
    export_onnx,
    load_classifier,
    measure_latency,
)
from mmlvit.models.attentions import BaseAttention
from mmlvit.utils.cli import add_cfg_options


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('config', help='classifier or distiller config')
    parser.add_argument(
        '--checkpoint',
        help='classifier (student) checkpoint; without one the weights are '
        "the model's fresh init (for timing)",
    )
    parser.add_argument('--out', required=True, help='the .onnx file')
    parser.add_argument(
        '--shape',
        type=int,
        nargs=2,
        metavar=('H', 'W'),
        help="input size (default: the backbone's img_size)",
    )
    parser.add_argument(
        '--batch-size',
        type=int,
        default=2,
        help='batch of the traced example, >= 2 (default: 2); the graph '
        'takes any batch',
    )
    parser.add_argument('--opset', type=int, default=18)
    parser.add_argument(
        '--check-batch-size',
        type=int,
        default=3,
        help='batch of the onnxruntime check (default: 3)',
    )
    parser.add_argument(
        '--latency',
        action='store_true',
        help='time PyTorch and onnxruntime (batch 1, median of --repeats)',
    )
    parser.add_argument('--repeats', type=int, default=10)
    parser.add_argument('--seed', type=int, default=0)
    add_cfg_options(parser, 'override config settings, as in tools/train.py')
    return parser.parse_args(argv)


def describe(model):
    """'ImageClassifier(LinearVisionTransformer; 12 x GatedLinearAttention)'
    (mmpretrain's softmax layers count as MultiheadAttention)."""
    counts = {}
    for module in model.modules():
        name = type(module).__name__
        if isinstance(module, BaseAttention) or name == 'MultiheadAttention':
            counts[name] = counts.get(name, 0) + 1
    ops = ', '.join(f'{n} x {name}' for name, n in counts.items())
    backbone = type(getattr(model, 'backbone', None)).__name__
    return f'{type(model).__name__}({backbone}; {ops or "no attention"})'


def input_shape(model, cfg, shape):
    """(C, H, W) of the exported input."""
    backbone = cfg.model.backbone
    channels = backbone.get('in_channels', 3)
    if shape is None:
        size = backbone.get('img_size', 224)
        shape = (size, size) if isinstance(size, int) else tuple(size)
    return (channels, *shape)


def main(argv=None):
    args = parse_args(argv)
    logger = MMLogger.get_instance('mmlvit-export', log_level='INFO')
    torch.manual_seed(args.seed)
    print_log(f'Config: {args.config}', logger)
    model, cfg = load_classifier(
        args.config, args.checkpoint, args.cfg_options
    )
    print_log(f'Model: {describe(model)}', logger)
    if args.checkpoint:
        print_log(f'Loaded checkpoint {args.checkpoint}', logger)
    else:
        print_log(
            'No checkpoint: the weights are random', logger, logging.WARNING
        )
    deployable = DeployableClassifier(model).eval()
    shape = input_shape(model, cfg, args.shape)
    dims = ', '.join(map(str, shape))
    print_log(
        f'Exporting to {args.out}: input images (batch, {dims}) '
        f'float32 pixels 0-255 -> scores (batch, classes); dynamic batch; '
        f'opset {args.opset}; torch {torch.__version__} dynamo exporter',
        logger,
    )
    start = time.perf_counter()
    try:
        export_onnx(deployable, args.out, shape, args.batch_size, args.opset)
    except OperatorExportError as error:
        print_log(str(error), logger, logging.ERROR)
        raise SystemExit(1) from error
    size_mb = osp.getsize(args.out) / 2**20
    print_log(
        f'Saved {args.out} ({size_mb:.1f} MiB) in '
        f'{time.perf_counter() - start:.1f} s',
        logger,
    )
    images = torch.rand(args.check_batch_size, *shape) * 255
    diff = compare_with_onnxruntime(deployable, args.out, images)
    print_log(
        f'onnxruntime vs PyTorch, batch {args.check_batch_size}: max abs '
        f'difference of the scores {diff:.3g}',
        logger,
    )
    if args.latency:
        timing = measure_latency(
            deployable, args.out, images[:1], repeats=args.repeats
        )
        print_log(
            f'Latency, batch 1, {shape[1]}x{shape[2]} px, '
            f'{torch.get_num_threads()} threads (median of {args.repeats}): '
            f'PyTorch {timing["pytorch"] * 1e3:.1f} ms, onnxruntime '
            f'{timing["onnxruntime"] * 1e3:.1f} ms',
            logger,
        )
    return diff


if __name__ == '__main__':
    main()
