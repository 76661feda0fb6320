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

import argparse
import os.path as osp
import sys
import time

from mmlvit.datasets.dense_fashion_mnist import (
    is_complete,
    make_dense_fashion_mnist,
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
    parser.add_argument(
        '--items',
        type=int,
        nargs=2,
        default=[2, 5],
        metavar=('MIN', 'MAX'),
        help='fewest and most items drawn per canvas (default: 2 5)',
    )
    parser.add_argument(
        '--scale',
        type=float,
        nargs=2,
        default=[1.0, 2.5],
        metavar=('MIN', 'MAX'),
        help='range of the scale factor of the 28 px items (default: 1.0 2.5)',
    )
    return parser.parse_args(argv)


def prepare(
    src,
    out,
    num_train,
    num_test,
    canvas,
    seed,
    items=(2, 5),
    scale=(1.0, 2.5),
):
    """Build the set in ``out`` unless it is already complete; return
    whether it was built. ``items`` and ``scale`` are the (min, max) ranges
    of ``make_dense_fashion_mnist``."""
    settings = dict(
        num_train=num_train,
        num_test=num_test,
        canvas=canvas,
        seed=seed,
        items=tuple(items),
        scale=tuple(scale),
    )
    if is_complete(out, **settings):
        print(f'Dense Fashion-MNIST already complete in {out} ({settings})')
        return False
    if not osp.isfile(osp.join(src, 't10k-labels-idx1-ubyte')):
        raise FileNotFoundError(
            f'Fashion-MNIST is not extracted in {src}: run '
            'python tools/data/prepare_fashion_mnist.py (or make setup), '
            'or pass --src.'
        )
    start = time.perf_counter()
    meta = make_dense_fashion_mnist(src, out, **settings)
    seconds = time.perf_counter() - start
    for split, count in meta['splits'].items():
        print(
            f'{split}: {count["images"]} canvases of {canvas}x{canvas} px, '
            f'{count["instances"]} instances -> {out}/images/{split}, '
            f'{out}/masks/{split}, {out}/annotations/instances_{split}.json'
        )
    print(f'Dense Fashion-MNIST written to {out} in {seconds:.1f} s')
    return True


def main(argv=None):
    args = parse_args(argv)
    prepare(
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
