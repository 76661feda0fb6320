"""STL-10 read from its official binary release (no download)."""

from typing import List, Optional

import numpy as np
from mmengine.fileio import exists, get, join_path, list_from_file
from mmpretrain.datasets import BaseDataset
from mmpretrain.registry import DATASETS

STL10_CATEGORIES = (
    'airplane',
    'bird',
    'car',
    'cat',
    'deer',
    'dog',
    'horse',
    'monkey',
    'ship',
    'truck',
)


@DATASETS.register_module()
class STL10(BaseDataset):
    """`STL-10 <https://cs.stanford.edu/~acoates/stl10/>`_: 96x96 colour
    images of 10 classes (5,000 train, 8,000 test).

    Reads the extracted ``stl10_binary.tar.gz``::

        data_root/stl10_binary/
            train_X.bin  train_y.bin  test_X.bin  test_y.bin
            class_names.txt  (optional: one name per line)

    ``*_X.bin`` holds uint8 images of 3 x 96 x 96 bytes, each channel stored
    column by column; ``*_y.bin`` one uint8 label in 1..10 per image. Images
    come out as (96, 96, 3) uint8 arrays in BGR order (as from
    ``LoadImageFromFile``), labels in 0..9. The unlabelled split is not read.

    Args:
        data_root (str): The folder holding ``stl10_binary/``.
        split (str): ``'train'`` or ``'test'``. Defaults to ``'train'``.
        metainfo (dict, optional): Overrides the class names, which otherwise
            come from ``class_names.txt`` or the standard 10 names.
        **kwargs: Other arguments of :class:`mmpretrain.datasets.BaseDataset`
            (``pipeline``, ``indices``, ``lazy_init``, ...).
    """

    METAINFO = {'classes': STL10_CATEGORIES}
    IMAGE_SHAPE = (3, 96, 96)
    SPLITS = ('train', 'test')

    def __init__(
        self,
        data_root: str,
        split: str = 'train',
        metainfo: Optional[dict] = None,
        **kwargs,
    ):
        if split not in self.SPLITS:
            raise ValueError(
                f'STL10: split must be one of {self.SPLITS}, got {split!r}'
            )
        self.split = split
        names_file = join_path(data_root, 'stl10_binary', 'class_names.txt')
        if metainfo is None and exists(names_file):
            names = tuple(n for n in list_from_file(names_file) if n.strip())
            if len(names) != len(STL10_CATEGORIES):
                raise ValueError(
                    f'STL10: {names_file} lists {len(names)} '
                    'class names, expected 10'
                )
            metainfo = dict(classes=names)
        super().__init__(
            ann_file='',
            data_root=data_root,
            metainfo=metainfo,
            test_mode=split == 'test',
            **kwargs,
        )

    def _read(self, suffix: str) -> np.ndarray:
        """The bytes of ``stl10_binary/{split}_{suffix}.bin`` as uint8."""
        path = join_path(
            self.data_root, 'stl10_binary', f'{self.split}_{suffix}.bin'
        )
        if not exists(path):
            raise FileNotFoundError(
                f'STL10: {path} not found (data_root={self.data_root!r}). '
                'Extract stl10_binary.tar.gz from '
                'https://cs.stanford.edu/~acoates/stl10/ into data_root so '
                'that data_root/stl10_binary/ holds train_X.bin, '
                'train_y.bin, test_X.bin and test_y.bin, or set the '
                "dataset's `data_root` field (see docs/datasets.md)."
            )
        return np.frombuffer(get(path), dtype=np.uint8)

    def load_data_list(self) -> List[dict]:
        """Decode every image of the split and pair it with its label."""
        pixels, labels = self._read('X'), self._read('y')
        image_bytes = int(np.prod(self.IMAGE_SHAPE))
        if pixels.size != labels.size * image_bytes:
            raise ValueError(
                f'STL10 {self.split}: {self.split}_X.bin has {pixels.size} '
                f'bytes, expected {labels.size} images (from '
                f'{self.split}_y.bin) x {image_bytes} bytes'
            )
        if labels.size and not 1 <= labels.min() <= labels.max() <= 10:
            raise ValueError(
                f'STL10 {self.split}: labels must lie in 1..10, found '
                f'{labels.min()}..{labels.max()}'
            )
        # (N, channel, column, row) -> (N, row, column, channel), RGB -> BGR.
        images = pixels.reshape(-1, *self.IMAGE_SHAPE).transpose(0, 3, 2, 1)
        images = np.ascontiguousarray(images[..., ::-1])
        return [
            dict(img=image, gt_label=int(label) - 1)
            for image, label in zip(images, labels)
        ]

    def extra_repr(self) -> List[str]:
        return [f'Split: \t{self.split}', f'Root: \t{self.data_root}']
