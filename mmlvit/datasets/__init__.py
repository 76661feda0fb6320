"""Datasets that mmpretrain lacks (registered in its DATASETS) and the
start-of-run check that every configured dataset is in place."""

from .data_root_check import (
    DatasetFileError,
    check_data_roots,
    find_damaged_data,
    find_missing_data,
)
from .imagenet_ood import ImageNetSubset, ImageNetV2
from .mnist5k import MNIST5k
from .stl10 import STL10

__all__ = [
    'DatasetFileError',
    'find_damaged_data',
    'MNIST5k',
    'STL10',
    'ImageNetSubset',
    'ImageNetV2',
    'check_data_roots',
    'find_missing_data',
]
