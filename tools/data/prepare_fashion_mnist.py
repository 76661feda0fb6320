"""Extract Debian's Fashion-MNIST (package ``dataset-fashion-mnist``) into a
folder that mmpretrain's ``FashionMNIST`` dataset reads with download=False.

    python tools/data/prepare_fashion_mnist.py [--src DIR] \
        [--dst data/fashion_mnist]

Idempotent: files already extracted with the right size are kept.
"""

import argparse
import gzip
import os
import os.path as osp
import shutil
import sys

DEBIAN_DIR = '/usr/share/datasets/fashion-mnist'
FILES = (
    'train-images-idx3-ubyte',
    'train-labels-idx1-ubyte',
    't10k-images-idx3-ubyte',
    't10k-labels-idx1-ubyte',
)
# Expected sizes of the extracted IDX files (header + payload).
SIZES = dict(
    zip(FILES, (16 + 60000 * 784, 8 + 60000, 16 + 10000 * 784, 8 + 10000))
)


def prepare(src=DEBIAN_DIR, dst='data/fashion_mnist'):
    """Gunzip the four IDX files from ``src`` into ``dst``; return ``dst``."""
    os.makedirs(dst, exist_ok=True)
    for name in FILES:
        out = osp.join(dst, name)
        if osp.isfile(out) and osp.getsize(out) == SIZES[name]:
            continue
        gz = osp.join(src, name + '.gz')
        if not osp.isfile(gz):
            raise FileNotFoundError(
                f'{gz} not found. Install the data with '
                '`apt-get install -y dataset-fashion-mnist` or pass --src.'
            )
        with gzip.open(gz, 'rb') as fin, open(out + '.part', 'wb') as fout:
            shutil.copyfileobj(fin, fout)
        os.replace(out + '.part', out)
        if osp.getsize(out) != SIZES[name]:
            raise RuntimeError(
                f'{out} has an unexpected size; {gz} may be corrupt.'
            )
    return dst


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--src',
        default=DEBIAN_DIR,
        help='folder of the four gzipped IDX files '
        '(train-images-idx3-ubyte.gz, ...); default: where the Debian '
        'package installs them, %(default)s',
    )
    parser.add_argument(
        '--dst',
        default='data/fashion_mnist',
        help='folder to extract them into, the data_root of the '
        'Fashion-MNIST configs (default: %(default)s)',
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    print(f'Fashion-MNIST ready in {prepare(args.src, args.dst)}')


if __name__ == '__main__':
    sys.exit(main())
