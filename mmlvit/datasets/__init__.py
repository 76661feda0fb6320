"""Datasets that mmpretrain lacks (registered in its DATASETS) and the
start-of-run check that every configured dataset is in place."""

import warnings

from .data_root_check import (
    DatasetFileError,
    check_data_roots,
    find_damaged_data,
    find_missing_data,
)
from .imagenet_ood import ImageNetSubset, ImageNetV2
from .mnist5k import MNIST5k
from .stl10 import STL10
from .transforms import MatchChannels

# mmpretrain's MNIST / Fashion-MNIST reader wraps read-only file bytes in a
# tensor it never writes; torch's warning about it says nothing to the user.
warnings.filterwarnings(
    'ignore',
    message='The given NumPy array is not writable',
    category=UserWarning,
    module=r'mmpretrain\.datasets\.mnist',
)

__all__ = [
    'DatasetFileError',
    'find_damaged_data',
    'MatchChannels',
    'MNIST5k',
    'STL10',
    'ImageNetSubset',
    'ImageNetV2',
    'check_data_roots',
    'find_missing_data',
]
