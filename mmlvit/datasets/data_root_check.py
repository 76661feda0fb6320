"""Fail at start, naming the config field, when a dataset is not in place.

mmpretrain's dataset classes report a missing dataset by the file they
could not open (CIFAR's message even suggests ``download=True``), not by the
config field to fix. :func:`check_data_roots` runs on the config before the
runner is built and names the field, e.g.
``train_dataloader.dataset.data_root``.
"""

import os.path as osp

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


def _expected_paths(dataset: dict) -> list:
    """Paths under data_root that the dataset of this config reads."""
    kind = dataset.get('type')
    if kind == 'ImageNet':
        prefix = dataset.get('data_prefix') or dataset.get('split')
        return [prefix] if isinstance(prefix, str) and prefix else []
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


def find_missing_data(cfg, loaders=LOADERS) -> list:
    """One message per dataset of ``cfg``'s dataloaders (those named in
    ``loaders``) whose local ``data_root`` (or a path the dataset class reads
    under it) is missing.
    """
    problems = []
    for loader in loaders:
        top = (cfg.get(loader) or {}).get('dataset')
        if not isinstance(top, dict):
            continue
        for field, dataset in _datasets(top, f'{loader}.dataset'):
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


def check_data_roots(cfg, loaders=LOADERS) -> None:
    """Raise FileNotFoundError naming every dataloader field whose dataset
    is not in place (see :func:`find_missing_data`)."""
    problems = find_missing_data(cfg, loaders)
    if problems:
        listed = '\n  '.join(problems)
        raise FileNotFoundError(
            f'Dataset not found:\n  {listed}\n'
            'Put the data there (layouts: docs/datasets.md and the comment at '
            'the top of the dataset config) or point the field at it: '
            '--cfg-options FIELD=PATH.'
        )
