"""Dense Fashion-MNIST made once: built from the extracted Fashion-MNIST
unless the folder already holds a complete set with the same settings."""

import os.path as osp
import time

from .dense_fashion_mnist import is_complete, make_dense_fashion_mnist


def prepare_dense_fashion_mnist(
    src: str,
    out: str,
    num_train: int,
    num_test: int,
    canvas: int,
    seed: int,
    items=(2, 5),
    scale=(1.0, 2.5),
) -> bool:
    """Build the set in ``out`` from the extracted Fashion-MNIST in ``src``
    unless it is already complete, printing what was written; return
    whether it was built. ``items`` and ``scale`` are the (min, max) ranges
    of :func:`make_dense_fashion_mnist`.

    Raises:
        FileNotFoundError: ``src`` holds no extracted Fashion-MNIST.
    """
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


def add_layout_options(parser, items=(2, 5), scale=(1.0, 2.5)) -> None:
    """The options ``--items MIN MAX`` and ``--scale MIN MAX`` (the ranges
    of the items per canvas and of their scale factor) with these
    defaults, on an argparse parser or argument group."""
    for option, kind, default, text in (
        ('--items', int, items, 'fewest and most items drawn per canvas'),
        ('--scale', float, scale, 'range of the scale factor of the items'),
    ):
        parser.add_argument(
            option,
            type=kind,
            nargs=2,
            default=list(default),
            metavar=('MIN', 'MAX'),
            help=f'{text} (default: {" ".join(map(str, default))})',
        )
