"""ImageNet out-of-distribution test sets, labelled in ImageNet-1K's space.

A model trained on ImageNet-1K is scored on ImageNet-A, -R, -Sketch and -V2
without remapping its head: every image gets the ImageNet-1K index of its
class. ImageNet-A and -R cover 200 classes; their datasets record those
classes in ``metainfo['subset_labels']`` for
:class:`mmlvit.evaluation.SubsetAccuracy`.
"""

from typing import List

from mmengine.fileio import get_file_backend
from mmpretrain.datasets import BaseDataset
from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
from mmpretrain.registry import DATASETS

from .imagenet_wnids import (
    IMAGENET_1K_WNIDS,
    IMAGENET_A_WNIDS,
    IMAGENET_R_WNIDS,
)

IMG_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.ppm', '.tif', '.webp')
WNID_TO_LABEL = {wnid: label for label, wnid in enumerate(IMAGENET_1K_WNIDS)}


class ClassFolderDataset(BaseDataset):
    """Images in one folder per class, ``img_prefix/<class folder>/<image>``,
    labelled by :meth:`folder_label` (an ImageNet-1K class index).

    Args:
        data_root (str): The dataset's root folder.
        data_prefix (str): The class folders' parent, relative to
            ``data_root``. Defaults to ``''`` (``data_root`` itself).
        **kwargs: Other arguments of :class:`mmpretrain.datasets.BaseDataset`
            (``pipeline``, ``indices``, ``lazy_init``, ...).
    """

    def __init__(self, data_root: str, data_prefix: str = '', **kwargs):
        super().__init__(
            ann_file='',
            data_root=data_root,
            data_prefix=data_prefix,
            metainfo=self.class_metainfo(),
            test_mode=True,
            **kwargs,
        )

    def class_metainfo(self) -> dict:
        return dict(classes=IMAGENET_CATEGORIES)

    def folder_label(self, folder: str) -> int:
        """The ImageNet-1K class index of the images in ``folder``."""
        raise NotImplementedError

    def load_data_list(self) -> List[dict]:
        root = self.img_prefix
        backend = get_file_backend(root, enable_singleton=True)
        if not backend.isdir(root):
            raise FileNotFoundError(
                f'{type(self).__name__}: image folder {root!r} does not '
                f'exist (data_root={self.data_root!r}). Put the dataset '
                "there (docs/datasets.md) or set the dataset's `data_root` "
                '(and `data_prefix`) field.'
            )
        data_list = []
        for folder in sorted(backend.list_dir_or_file(root, list_file=False)):
            label = self.folder_label(folder)
            folder_path = backend.join_path(root, folder)
            for name in sorted(
                backend.list_dir_or_file(folder_path, list_dir=False)
            ):
                if name.lower().endswith(IMG_EXTENSIONS):
                    data_list.append(
                        dict(
                            img_path=backend.join_path(folder_path, name),
                            gt_label=label,
                        )
                    )
        if not data_list:
            raise FileNotFoundError(
                f'{type(self).__name__}: no images in the class folders of '
                f'{root!r} (data_root={self.data_root!r})'
            )
        return data_list

    def extra_repr(self) -> List[str]:
        return [f'Images: \t{self.img_prefix}']


@DATASETS.register_module()
class ImageNetSubset(ClassFolderDataset):
    """ImageNet-A, -R or -Sketch: class folders named by WordNet id.

    ::

        data_root/data_prefix/
            n01443537/  *.jpg ...
            n01484850/  ...

    Labels are ImageNet-1K indices. ``metainfo['subset_labels']`` lists the
    ImageNet-1K indices of the ``subset`` (all 200 of ImageNet-A or -R, even
    if some folders are absent), which
    :class:`mmlvit.evaluation.SubsetAccuracy` restricts predictions to. A
    folder outside the subset is an error, not silently skipped.

    Args:
        data_root (str): The dataset's root folder.
        subset (str): ``'imagenet-a'`` or ``'imagenet-r'`` (200 classes), or
            ``'imagenet-1k'`` (all 1000, for ImageNet-Sketch).
        data_prefix (str): The wnid folders' parent, relative to
            ``data_root``. Defaults to ``''``.
        **kwargs: Other arguments of :class:`mmpretrain.datasets.BaseDataset`.
    """

    SUBSETS = {
        'imagenet-a': IMAGENET_A_WNIDS,
        'imagenet-r': IMAGENET_R_WNIDS,
        'imagenet-1k': IMAGENET_1K_WNIDS,
    }

    def __init__(
        self, data_root: str, subset: str, data_prefix: str = '', **kwargs
    ):
        if subset not in self.SUBSETS:
            raise ValueError(
                f'ImageNetSubset: subset must be one of '
                f'{sorted(self.SUBSETS)}, got {subset!r}'
            )
        self.subset = subset
        super().__init__(data_root, data_prefix, **kwargs)

    def class_metainfo(self) -> dict:
        labels = sorted(WNID_TO_LABEL[w] for w in self.SUBSETS[self.subset])
        return dict(classes=IMAGENET_CATEGORIES, subset_labels=labels)

    def folder_label(self, folder: str) -> int:
        if folder not in WNID_TO_LABEL:
            raise ValueError(
                f'ImageNetSubset: folder {folder!r} in {self.img_prefix!r} '
                'is not an ImageNet-1K WordNet id'
            )
        if folder not in self.SUBSETS[self.subset]:
            raise ValueError(
                f'ImageNetSubset: class {folder} is not one of the '
                f'{len(self.SUBSETS[self.subset])} classes of subset '
                f'{self.subset!r}: is {self.img_prefix!r} the right dataset?'
            )
        return WNID_TO_LABEL[folder]


@DATASETS.register_module()
class ImageNetV2(ClassFolderDataset):
    """ImageNet-V2: class folders named by ImageNet-1K index, ``0``..``999``
    (numeric, not lexicographic, order).

    ::

        data_root/data_prefix/
            0/  *.jpeg ...
            1/  ...
            ...
            999/

    Args:
        data_root (str): The dataset's root folder.
        data_prefix (str): The index folders' parent, relative to
            ``data_root`` (e.g. ``'imagenetv2-matched-frequency-format-val'``).
            Defaults to ``''``.
        **kwargs: Other arguments of :class:`mmpretrain.datasets.BaseDataset`.
    """

    def folder_label(self, folder: str) -> int:
        if not (folder.isdigit() and int(folder) < len(IMAGENET_1K_WNIDS)):
            raise ValueError(
                f'ImageNetV2: folder {folder!r} in {self.img_prefix!r} is '
                'not an ImageNet-1K class index 0..999'
            )
        return int(folder)
