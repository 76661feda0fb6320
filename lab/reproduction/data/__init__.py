"""Dense Fashion-MNIST (docs/dense_data.md), the dense reproduction's data
set: :mod:`.canvas` draws one canvas and its annotations,
:mod:`.dense_fashion_mnist` writes a set, :mod:`.prepare` makes one
unless it is already there. No dataset is registered: MMSegmentation's and
MMDetection's own datasets read the files."""

from .dense_fashion_mnist import (
    CLASSES,
    SEG_CLASSES,
    is_complete,
    make_dense_fashion_mnist,
    read_meta,
)
from .prepare import add_layout_options, prepare_dense_fashion_mnist

__all__ = [
    'add_layout_options',
    'CLASSES',
    'SEG_CLASSES',
    'is_complete',
    'make_dense_fashion_mnist',
    'prepare_dense_fashion_mnist',
    'read_meta',
]
