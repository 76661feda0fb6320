"""ImageNet-A/-R/-Sketch/-V2: class lists, labels in ImageNet-1K's index
space, and accuracy restricted to a dataset's class subset."""

import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.evaluator import Evaluator
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmpretrain.registry import DATASETS
from mmpretrain.structures import DataSample
from PIL import Image

import mmlvit  # noqa: F401  (registers the datasets and the metric)
from mmlvit.datasets.imagenet_wnids import (
    IMAGENET_1K_WNIDS,
    IMAGENET_A_WNIDS,
    IMAGENET_R_WNIDS,
)

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# Facts from the official ImageNet-A evaluation (thousand_k_to_200): the
# first ImageNet-A classes are ImageNet-1K classes 6, 11, 13, 15, 17.
A_FIRST = {'n01498041': 6, 'n01531178': 11, 'n01534433': 13}


def make_tree(root, counts):
    """Class folders with ``counts[name]`` tiny PNGs each, plus the files
    the official releases keep beside and inside them."""
    for name, count in counts.items():
        (root / name).mkdir(parents=True)
        for i in range(count):
            pixels = np.full((12, 16, 3), 40 * i, np.uint8)
            Image.fromarray(pixels).save(root / name / f'{i}.png')
        (root / name / 'notes.txt').write_text('not an image')
    (root / 'README.txt').write_text('not a class folder')


def build(**kwargs):
    init_default_scope('mmpretrain')
    return DATASETS.build(kwargs)


def test_wnid_lists_match_timm_copies():
    info = osp.join(
        osp.dirname(pytest.importorskip('timm').__file__), 'data', '_info'
    )

    def read(name):
        with open(osp.join(info, name)) as f:
            return [line.strip() for line in f if line.strip()]

    assert list(IMAGENET_1K_WNIDS) == read('imagenet_synsets.txt')
    assert list(IMAGENET_A_WNIDS) == read('imagenet_a_synsets.txt')
    assert list(IMAGENET_R_WNIDS) == read('imagenet_r_synsets.txt')
    a_indices = [int(i) for i in read('imagenet_a_indices.txt')]
    assert [IMAGENET_1K_WNIDS.index(w) for w in IMAGENET_A_WNIDS] == a_indices


def test_wnid_lists_are_sorted_and_known():
    assert len(set(IMAGENET_1K_WNIDS)) == 1000
    assert list(IMAGENET_1K_WNIDS) == sorted(IMAGENET_1K_WNIDS)
    assert IMAGENET_1K_WNIDS[0] == 'n01440764'  # tench
    assert IMAGENET_1K_WNIDS[999] == 'n15075141'  # toilet tissue
    for subset in (IMAGENET_A_WNIDS, IMAGENET_R_WNIDS):
        assert len(set(subset)) == 200 and set(subset) < set(IMAGENET_1K_WNIDS)
    for wnid, index in A_FIRST.items():
        assert IMAGENET_1K_WNIDS[index] == wnid


def test_subset_labels_in_imagenet_space(tmp_path):
    make_tree(tmp_path, {'n01498041': 2, 'n01531178': 1, 'n01534433': 1})
    dataset = build(
        type='ImageNetSubset', data_root=str(tmp_path), subset='imagenet-a'
    )
    assert len(dataset) == 4
    assert [dataset.get_data_info(i)['gt_label'] for i in range(4)] == [
        6,
        6,
        11,
        13,
    ]
    assert dataset.get_data_info(0)['img_path'].endswith(
        osp.join('n01498041', '0.png')
    )
    meta = dataset.metainfo
    assert len(meta['classes']) == 1000
    assert meta['classes'][6] == 'stingray'  # n01498041
    # All 200 classes of ImageNet-A, not only the folders present.
    assert len(meta['subset_labels']) == 200
    assert meta['subset_labels'][:5] == [6, 11, 13, 15, 17]
    assert meta['subset_labels'][-1] == 988


def test_imagenet_r_and_sketch_subsets(tmp_path):
    make_tree(tmp_path / 'sketch', {'n01440764': 1, 'n01443537': 1})
    sketch = build(
        type='ImageNetSubset',
        data_root=str(tmp_path),
        data_prefix='sketch',
        subset='imagenet-1k',
    )
    assert [sketch.get_data_info(i)['gt_label'] for i in range(2)] == [0, 1]
    assert sketch.metainfo['subset_labels'] == list(range(1000))
    # tench (class 0) is not an ImageNet-R class; goldfish (1) is.
    with pytest.raises(ValueError, match='not one of the 200 classes'):
        build(
            type='ImageNetSubset',
            data_root=str(tmp_path / 'sketch'),
            subset='imagenet-r',
        )
    (tmp_path / 'sketch' / 'n01440764' / '0.png').unlink()
    (tmp_path / 'sketch' / 'n01440764').rename(tmp_path / 'sketch' / 'x')
    with pytest.raises(ValueError, match='not an ImageNet-1K WordNet id'):
        build(
            type='ImageNetSubset',
            data_root=str(tmp_path / 'sketch'),
            subset='imagenet-r',
        )


def test_imagenet_v2_folders_are_numeric_labels(tmp_path):
    make_tree(tmp_path / 'v2', {'0': 1, '10': 1, '2': 1, '999': 1})
    dataset = build(
        type='ImageNetV2', data_root=str(tmp_path), data_prefix='v2'
    )
    labels = sorted(dataset.get_data_info(i)['gt_label'] for i in range(4))
    assert labels == [0, 2, 10, 999]
    for info in (dataset.get_data_info(i) for i in range(4)):
        folder = osp.basename(osp.dirname(info['img_path']))
        assert info['gt_label'] == int(folder)
    (tmp_path / 'v2' / '1000').mkdir()
    with pytest.raises(ValueError, match='0..999'):
        build(type='ImageNetV2', data_root=str(tmp_path), data_prefix='v2')


def test_missing_or_empty_root_is_named(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        build(
            type='ImageNetSubset',
            data_root=str(tmp_path / 'imagenet-a'),
            subset='imagenet-a',
        )
    assert 'data_root' in str(err.value) and 'imagenet-a' in str(err.value)
    (tmp_path / 'empty').mkdir()
    with pytest.raises(FileNotFoundError, match='no images'):
        build(type='ImageNetV2', data_root=str(tmp_path / 'empty'))
    with pytest.raises(ValueError, match='subset must be one of'):
        build(type='ImageNetSubset', data_root=str(tmp_path), subset='a')


def scores(entries):
    """A 1000-class score vector with the given {class: score} entries."""
    score = torch.zeros(1000)
    for label, value in entries.items():
        score[label] = value
    return score


def test_subset_accuracy_by_hand(tmp_path):
    make_tree(tmp_path, {'n01498041': 1})
    meta = build(
        type='ImageNetSubset', data_root=str(tmp_path), subset='imagenet-a'
    ).metainfo
    # Class 0 (tench) and 1 (goldfish) are not ImageNet-A classes; 6, 11,
    # 13, 15 are. Per sample: (label, scores) -> subset top-1 / top-2 hit.
    samples = [
        (6, {0: 0.9, 6: 0.5, 11: 0.4}),  # 1000-way: 0; subset: 6 -> hit, hit
        (11, {11: 0.8, 6: 0.1}),  # 11 -> hit, hit
        (13, {1: 0.9, 6: 0.6, 13: 0.5}),  # subset: 6, then 13 -> miss, hit
        (6, {999: 0.9, 13: 0.7, 15: 0.6}),  # subset: 13, 15 -> miss, miss
    ]
    data_samples = [
        DataSample().set_gt_label(label).set_pred_score(scores(entries))
        for label, entries in samples
    ]
    plain = Evaluator([dict(type='Accuracy', topk=(1, 2))])
    plain.process(data_samples)
    assert plain.evaluate(4) == pytest.approx(
        {'accuracy/top1': 25.0, 'accuracy/top2': 50.0}
    )
    subset = Evaluator([dict(type='SubsetAccuracy', topk=(1, 2))])
    subset.dataset_meta = meta
    subset.process(data_samples)
    assert subset.evaluate(4) == pytest.approx(
        {'accuracy/top1': 50.0, 'accuracy/top2': 75.0}
    )


def test_subset_accuracy_errors():
    sample = DataSample().set_gt_label(0).set_pred_score(torch.ones(1000))
    metric = Evaluator([dict(type='SubsetAccuracy')])
    with pytest.raises(KeyError, match='subset_labels'):
        metric.process([sample])
    metric.dataset_meta = dict(subset_labels=[6, 11])
    with pytest.raises(ValueError, match='not in'):
        metric.process([sample])
    with pytest.raises(KeyError, match='pred_score'):
        metric.process([DataSample().set_gt_label(6).set_pred_label(6)])


def test_imagenet_a_config_through_the_runner(tmp_path):
    """The ImageNet-A config as docs/datasets.md composes it, run by
    mmengine's Runner: the test loop hands the dataset's subset to the
    metric. The head scores tench (not in ImageNet-A) highest, then 6, 11."""
    make_tree(tmp_path / 'imagenet-a', {'n01498041': 2, 'n01531178': 1})
    config = tmp_path / 'eval_imagenet-a.py'
    config.write_text(f"""
_base_ = [
    {osp.join(ROOT, 'configs/_base_/datasets/imagenet-a_lvit.py')!r},
    {osp.join(ROOT, 'configs/_base_/default_runtime.py')!r},
]
model = dict(
    type='ImageClassifier',
    backbone=dict(type='VisionTransformer', img_size=224, patch_size=32,
                  arch=dict(embed_dims=8, num_layers=1, num_heads=2,
                            feedforward_channels=8)),
    head=dict(type='LinearClsHead', num_classes=1000, in_channels=8))
test_cfg = dict()
""")
    cfg = Config.fromfile(str(config))
    cfg.work_dir = str(tmp_path / 'work')
    cfg.test_dataloader.update(
        batch_size=2, num_workers=0, persistent_workers=False
    )
    cfg.test_dataloader.dataset.data_root = str(tmp_path / 'imagenet-a')
    runner = Runner.from_cfg(cfg)
    head = runner.model.head.fc
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[[0, 6, 11]] = torch.tensor([9.0, 5.0, 4.0])
    metrics = runner.test()
    # Images: two of class 6, one of class 11. 1000-way top-1 would be 0%.
    assert metrics == pytest.approx(
        {'accuracy/top1': 200 / 3, 'accuracy/top5': 100.0}
    )
