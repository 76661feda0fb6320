"""Fail at start, naming the config field, when a dataset is not in place.

mmpretrain's dataset classes report a missing dataset by the file they
could not open (CIFAR's message even suggests ``download=True``), not by the
config field to fix. :func:`check_data_roots` runs on the config before the
runner is built and names the field, e.g.
``train_dataloader.dataset.data_root``. It also reads the headers of the
MNIST/FashionMNIST IDX files, so that a truncated or foreign file is named
with what is wrong (:mod:`mmlvit.datasets.idx_files`) before training.
"""

import os.path as osp

from .idx_files import idx_files, idx_problems

LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')

# What mmpretrain's classes read under data_root, by type and split.
EXPECTED_PATHS = {
    'CIFAR10': lambda split: ['cifar-10-batches-py'],
    'CIFAR100': lambda split: ['cifar-100-python'],
    'Food101': lambda split: ['images', f'meta/{split}.txt'],
    'Flowers102': lambda split: ['jpg', 'imagelabels.mat', 'setid.mat'],
    'OxfordIIITPet': lambda split: ['images', f'annotations/{split}.txt'],
}
DEFAULT_SPLITS = {'Food101': 'train', 'OxfordIIITPet': 'trainval'}
IDX_TYPES = ('MNIST', 'FashionMNIST')


class DatasetFileError(ValueError):
    """A dataset file is in place but damaged or of another format."""


def _root(dataset):
    """The folder a dataset reads (``data_root`` joined with a string
    ``data_prefix``)."""
    root, prefix = dataset.get('data_root'), dataset.get('data_prefix')
    return osp.join(root, prefix) if isinstance(prefix, str) else root


def _expected_paths(dataset: dict) -> list:
    """Paths under data_root that the dataset of this config reads."""
    kind = dataset.get('type')
    if kind == 'ImageNet':
        prefix = dataset.get('data_prefix') or dataset.get('split')
        return [prefix] if isinstance(prefix, str) and prefix else []
    if kind in IDX_TYPES and dataset.get('download', True) is False:
        return list(idx_files(dataset.get('split', 'train')))
    if kind in EXPECTED_PATHS:
        split = dataset.get('split', DEFAULT_SPLITS.get(kind))
        return EXPECTED_PATHS[kind](split)
    return []


def _datasets(dataset: dict, field: str):
    """(field, dataset config) of a dataset and of the ones it wraps."""
    yield field, dataset
    if isinstance(dataset.get('dataset'), dict):
        yield from _datasets(dataset['dataset'], f'{field}.dataset')
    for i, child in enumerate(dataset.get('datasets') or []):
        yield from _datasets(child, f'{field}.datasets.{i}')


def _configured(cfg, loaders):
    """(field, dataset config) of every dataset of ``cfg``'s dataloaders
    named in ``loaders``, wrapped ones included."""
    for loader in loaders:
        top = (cfg.get(loader) or {}).get('dataset')
        if isinstance(top, dict):
            yield from _datasets(top, f'{loader}.dataset')


def find_missing_data(cfg, loaders=LOADERS) -> list:
    """One message per dataset of ``cfg``'s dataloaders (those named in
    ``loaders``) whose local ``data_root`` (or a path the dataset class reads
    under it) is missing.
    """
    problems = []
    for field, dataset in _configured(cfg, loaders):
        root = dataset.get('data_root')
        if not isinstance(root, str) or not root or '://' in root:
            continue
        if not osp.isdir(root):
            problems.append(f'{field}.data_root={root!r} does not exist')
            continue
        missing = [
            p
            for p in _expected_paths(dataset)
            if not osp.exists(osp.join(root, p))
        ]
        if missing:
            problems.append(
                f'{field}.data_root={root!r} lacks {", ".join(missing)} '
                f'(what {dataset["type"]} reads there)'
            )
    return problems


def find_damaged_data(cfg, loaders=LOADERS) -> list:
    """One message per damaged file of ``cfg``'s MNIST/FashionMNIST
    datasets, naming the dataloader field and the file."""
    problems = []
    for field, dataset in _configured(cfg, loaders):
        root = _root(dataset)
        if dataset.get('type') in IDX_TYPES and isinstance(root, str):
            split = dataset.get('split', 'train')
            problems += [
                f'{field} ({dataset["type"]}): {problem}'
                for problem in idx_problems(root, split)
            ]
    return problems


def check_data_roots(cfg, loaders=LOADERS) -> None:
    """Raise FileNotFoundError naming every dataloader field whose dataset
    is not in place (see :func:`find_missing_data`), and
    :class:`DatasetFileError` naming every damaged IDX file (see
    :func:`find_damaged_data`)."""
    damaged = find_damaged_data(cfg, loaders)
    if damaged:
        listed = '\n  '.join(dict.fromkeys(damaged))
        raise DatasetFileError(
            f'Damaged dataset files:\n  {listed}\n'
            'Replace them with intact copies (for Fashion-MNIST, '
            'python tools/data/prepare_fashion_mnist.py extracts them '
            'again) or point the field at intact data: --cfg-options '
            'FIELD=PATH.'
        )
    problems = find_missing_data(cfg, loaders)
    if problems:
        listed = '\n  '.join(problems)
        raise FileNotFoundError(
            f'Dataset not found:\n  {listed}\n'
            'Put the data there (layouts: docs/datasets.md and the comment at '
            'the top of the dataset config) or point the field at it: '
            '--cfg-options FIELD=PATH.'
        )
