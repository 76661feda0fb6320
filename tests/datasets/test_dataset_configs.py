"""The dataset configs: they parse, their datasets and pipelines build, the
pipelines follow the paper's recipe on synthetic images, and a missing
dataset is reported by its config field."""

import copy
import os
import os.path as osp

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import DATASETS
from PIL import Image

from mmlvit.datasets import check_data_roots, find_missing_data

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DATASETS_DIR = osp.join(ROOT, 'configs', '_base_', 'datasets')
# config -> (dataset type, classes, train split, test split, input kind)
TRAINING = {
    'imagenet_bs64_lvit.py': ('ImageNet', 1000, 'train', 'val', 'file'),
    'cifar10_lvit.py': ('CIFAR10', 10, 'train', 'test', 'rgb_array'),
    'cifar100_lvit.py': ('CIFAR100', 100, 'train', 'test', 'rgb_array'),
    'stl10_lvit.py': ('STL10', 10, 'train', 'test', 'bgr_array'),
    'food101_lvit.py': ('Food101', 101, 'train', 'test', 'file'),
    'flowers102_lvit.py': ('Flowers102', 102, 'train', 'test', 'file'),
    'pets_lvit.py': ('OxfordIIITPet', 37, 'trainval', 'test', 'file'),
    'fashion_mnist_lvit.py': ('FashionMNIST', 10, 'train', 'test', 'grey'),
}
# Your own image folders (CustomDataset, data_prefix train/ and val/;
# trained end to end by tests/tools/test_convert_datasets.py).
FOLDER = 'image_folder_lvit.py'
OOD = {
    'imagenet-a_lvit.py': ('ImageNetSubset', 'SubsetAccuracy'),
    'imagenet-r_lvit.py': ('ImageNetSubset', 'SubsetAccuracy'),
    'imagenet-sketch_lvit.py': ('ImageNetSubset', 'Accuracy'),
    'imagenet-v2_lvit.py': ('ImageNetV2', 'Accuracy'),
}
LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')
RGB = (200, 120, 40)  # a constant colour with distinct channels


def load(name):
    init_default_scope('mmpretrain')
    return Config.fromfile(osp.join(DATASETS_DIR, name))


def sample(kind, tmp_path):
    """A pipeline input holding a 60x80 image of colour RGB."""
    pixels = np.empty((60, 80, 3), np.uint8)
    pixels[:] = RGB
    if kind == 'file':
        path = tmp_path / 'image.png'
        Image.fromarray(pixels).save(path)
        return dict(img_path=str(path), gt_label=1)
    if kind == 'rgb_array':  # mmpretrain's CIFAR yields RGB arrays
        return dict(img=pixels[:32, :32].copy(), gt_label=1)
    if kind == 'grey':  # mmpretrain's MNIST family yields (H, W) arrays
        return dict(img=pixels[:28, :28, 0].copy(), gt_label=1)
    return dict(img=pixels[..., ::-1].copy(), gt_label=1)  # BGR, as STL10


def build_lazily(dataset_cfg):
    """The dataset object, without reading any data."""
    return DATASETS.build(dict(copy.deepcopy(dataset_cfg), lazy_init=True))


def test_every_dataset_config_is_covered():
    names = {n for n in os.listdir(DATASETS_DIR) if n.endswith('_lvit.py')}
    assert names == set(TRAINING) | set(OOD) | {FOLDER}


@pytest.mark.parametrize('name', sorted(TRAINING))
def test_training_config(name, tmp_path):
    kind, classes, train_split, test_split, source = TRAINING[name]
    cfg = load(name)
    assert cfg.data_preprocessor.num_classes == classes
    assert cfg.data_preprocessor.mean == [123.675, 116.28, 103.53]
    assert cfg.data_preprocessor.std == [58.395, 57.12, 57.375]
    assert cfg.data_preprocessor.to_rgb
    assert cfg.train_dataloader.dataset.split == train_split
    assert cfg.val_dataloader.dataset.split == test_split
    assert cfg.test_dataloader.dataset.split == test_split
    assert cfg.train_dataloader.dataset.data_root.startswith('data/')
    if kind.startswith('CIFAR'):
        assert cfg.train_dataloader.dataset.download is False
        assert cfg.val_dataloader.dataset.download is False

    train = build_lazily(cfg.train_dataloader.dataset)
    test = build_lazily(cfg.test_dataloader.dataset)
    assert type(train).__name__ == kind and not train.test_mode
    assert type(test).__name__ == kind and test.test_mode
    if train.CLASSES is not None:  # Flowers102 carries no names
        assert len(train.CLASSES) == classes

    for dataset in (train, test):
        packed = dataset.pipeline(sample(source, tmp_path))
        inputs = packed['inputs']
        assert tuple(inputs.shape) == (3, 224, 224)
        assert packed['data_samples'].gt_label.tolist() == [1]
    # The test pipeline is deterministic and leaves a constant colour
    # unchanged, in BGR order as the preprocessor (to_rgb=True) expects (a
    # grey image in all three channels).
    inputs = test.pipeline(sample(source, tmp_path))['inputs']
    colour = [RGB[0]] * 3 if source == 'grey' else list(RGB[::-1])
    assert inputs.reshape(3, -1).unique(dim=1).flatten().tolist() == colour


# The first steps that bring an image into the recipe's pipeline.
LOADING = ('LoadImageFromFile', 'PILToNumpy', 'MatchChannels')


def test_recipe_augmentations():
    cfg = load('food101_lvit.py')
    train = {t['type']: t for t in cfg.train_pipeline}
    assert list(train) == [
        'LoadImageFromFile',
        'RandomResizedCrop',
        'RandomFlip',
        'ColorJitter',
        'PackInputs',
    ]
    assert train['RandomResizedCrop']['scale'] == 224
    assert train['RandomResizedCrop']['interpolation'] == 'bicubic'
    assert train['RandomFlip']['prob'] == 0.5
    jitter = train['ColorJitter']
    assert (
        jitter['brightness'],
        jitter['contrast'],
        jitter['saturation'],
    ) == (0.4, 0.4, 0.4)
    for name in TRAINING:
        other = load(name)
        assert [
            t for t in other.train_pipeline if t['type'] not in LOADING
        ] == cfg.train_pipeline[1:], name
        assert [
            t for t in other.test_pipeline if t['type'] not in LOADING
        ] == cfg.test_pipeline[1:], name


def test_center_crop_is_0_9_of_the_resized_image(tmp_path):
    """Test pipeline = PIL: shorter side to 249 (224 / 0.9), bicubic, then
    the central 224 x 224."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / 'image.png')
    test = build_lazily(load('imagenet_bs64_lvit.py').test_dataloader.dataset)
    inputs = test.pipeline(
        dict(img_path=str(tmp_path / 'image.png'), gt_label=0)
    )['inputs'].numpy()
    resized = np.asarray(
        Image.fromarray(pixels).resize((332, 249), Image.BICUBIC)
    )
    top, left = (249 - 224) // 2, (332 - 224) // 2
    expected = resized[top : top + 224, left : left + 224]
    np.testing.assert_array_equal(inputs[::-1].transpose(1, 2, 0), expected)


@pytest.mark.parametrize('name', sorted(OOD))
def test_ood_config(name, tmp_path):
    kind, metric = OOD[name]
    cfg = load(name)
    assert 'train_dataloader' not in cfg and 'val_dataloader' not in cfg
    assert cfg.data_preprocessor.num_classes == 1000
    assert cfg.test_evaluator.type == metric
    test = build_lazily(cfg.test_dataloader.dataset)
    assert type(test).__name__ == kind and test.test_mode
    assert len(test.metainfo['classes']) == 1000
    if metric == 'SubsetAccuracy':
        assert len(test.metainfo['subset_labels']) == 200
    packed = test.pipeline(sample('file', tmp_path))
    assert tuple(packed['inputs'].shape) == (3, 224, 224)


def test_image_folder_config(tmp_path):
    """Classes from the folders of data_prefix train/ and val/; images
    read in colour through the recipe, as the other datasets."""
    cfg = load(FOLDER)
    assert cfg.data_preprocessor.mean == [123.675, 116.28, 103.53]
    train = build_lazily(cfg.train_dataloader.dataset)
    test = build_lazily(cfg.test_dataloader.dataset)
    assert type(train).__name__ == type(test).__name__ == 'CustomDataset'
    assert not train.test_mode and test.test_mode
    assert (
        cfg.train_dataloader.dataset.data_prefix,
        cfg.test_dataloader.dataset.data_prefix,
    ) == ('train', 'val')
    for dataset in (train, test):
        packed = dataset.pipeline(sample('file', tmp_path))
        assert tuple(packed['inputs'].shape) == (3, 224, 224)


@pytest.mark.parametrize('name', sorted(TRAINING) + sorted(OOD) + [FOLDER])
def test_missing_data_root_names_the_field(name, tmp_path):
    cfg = load(name)
    missing = str(tmp_path / 'missing')
    for loader in LOADERS:
        if loader in cfg:
            cfg[loader].dataset.data_root = missing
    with pytest.raises(FileNotFoundError) as err:
        check_data_roots(cfg)
    for loader in LOADERS:
        assert (f'{loader}.dataset.data_root' in str(err.value)) == (
            loader in cfg
        ), loader
    assert missing in str(err.value)
    assert 'docs/datasets.md' in str(err.value)


# What mmpretrain's classes read under data_root, for the layouts check.
LAYOUTS = {
    'imagenet_bs64_lvit.py': ['train/', 'val/'],
    'cifar10_lvit.py': ['cifar-10-batches-py/'],
    'cifar100_lvit.py': ['cifar-100-python/'],
    'food101_lvit.py': ['images/', 'meta/train.txt', 'meta/test.txt'],
    'flowers102_lvit.py': ['jpg/', 'imagelabels.mat', 'setid.mat'],
    'pets_lvit.py': [
        'images/',
        'annotations/trainval.txt',
        'annotations/test.txt',
    ],
}


@pytest.mark.parametrize('name', sorted(LAYOUTS))
def test_incomplete_layout_names_the_field_and_the_path(name, tmp_path):
    cfg = load(name)
    for loader in LOADERS:
        cfg[loader].dataset.data_root = str(tmp_path)
    for path in LAYOUTS[name]:
        assert find_missing_data(cfg), path  # still incomplete
        target = tmp_path / path
        if path.endswith('/'):
            target.mkdir(parents=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text('')
    assert find_missing_data(cfg) == []
    first = LAYOUTS[name][0]
    (tmp_path / first).rename(tmp_path / 'moved')
    problems = find_missing_data(cfg)
    assert problems and all(first.rstrip('/') in p for p in problems)
    assert problems[0].startswith('train_dataloader.dataset.data_root=')


def test_wrapped_datasets_are_checked(tmp_path):
    cfg = Config(
        dict(
            train_dataloader=dict(
                dataset=dict(
                    type='ConcatDataset',
                    datasets=[
                        dict(
                            type='RepeatDataset',
                            times=2,
                            dataset=dict(
                                type='STL10', data_root=str(tmp_path / 'a')
                            ),
                        ),
                        dict(type='STL10', data_root=str(tmp_path)),
                    ],
                )
            ),
            val_dataloader=None,
        )
    )
    assert find_missing_data(cfg) == [
        'train_dataloader.dataset.datasets.0.dataset.data_root='
        f'{str(tmp_path / "a")!r} does not exist'
    ]
