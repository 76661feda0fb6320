"""Build Dense Fashion-MNIST (docs/dense_data.md) from the extracted
Fashion-MNIST IDX files: grey canvases of occluding items with semantic masks
(MMSegmentation) and COCO instance annotations (MMDetection).

    python tools/data/prepare_dense_fashion_mnist.py \
        [--src data/fashion_mnist] [--out data/dense_fashion_mnist] \
        [--num-train 1000] [--num-test 200] [--canvas 128] [--seed 0] \
        [--items 2 5] [--scale 1.0 2.5]

Skips the work when --out already holds a complete set made with the same
arguments; otherwise (other arguments, or an interrupted run: no meta.json)
rebuilds it. The same arguments always give byte-identical files.
"""

from pathlib import Path
import argparse
import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab.reproduction.data import (
    add_layout_options,
    prepare_dense_fashion_mnist,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--src',
        default='data/fashion_mnist',
        help='extracted Fashion-MNIST (tools/data/prepare_fashion_mnist.py; '
        'default: %(default)s)',
    )
    parser.add_argument(
        '--out',
        default='data/dense_fashion_mnist',
        help='folder of the set, the data_root of the dense configs '
        '(default: %(default)s)',
    )
    parser.add_argument(
        '--num-train',
        type=int,
        default=1000,
        help='training canvases (default: %(default)s)',
    )
    parser.add_argument(
        '--num-test',
        type=int,
        default=200,
        help='test canvases (default: %(default)s)',
    )
    parser.add_argument(
        '--canvas',
        type=int,
        default=128,
        help='canvas side in pixels (default: %(default)s)',
    )
    parser.add_argument(
        '--seed',
        type=int,
        default=0,
        help='seed of the layout; the same arguments give the same files '
        '(default: %(default)s)',
    )
    add_layout_options(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    prepare_dense_fashion_mnist(
        args.src,
        args.out,
        args.num_train,
        args.num_test,
        args.canvas,
        args.seed,
        args.items,
        args.scale,
    )


if __name__ == '__main__':
    sys.exit(main())
