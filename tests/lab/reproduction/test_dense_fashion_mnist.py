"""Dense Fashion-MNIST: the generator is deterministic, its images, masks and
COCO annotations agree, and MMSegmentation's and MMDetection's own dataset
classes and metrics read it through the base configs."""

import ast
import copy
import json
import os
import os.path as osp

import numpy as np
import pytest
from mmengine.config import Config
from PIL import Image

from lab.reproduction import data as dense
from lab.reproduction.data import canvas, dense_fashion_mnist

ROOT = osp.dirname(
    osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
)
SEG_CONFIG = osp.join(
    ROOT, 'configs/_base_/datasets/dense_fashion_mnist_seg.py'
)
DET_CONFIG = osp.join(
    ROOT, 'configs/_base_/datasets/dense_fashion_mnist_det.py'
)
CLI = 'tools/data/prepare_dense_fashion_mnist.py'
SIZES = dict(num_train=6, num_test=5)
CANVAS = 128
# pycocotools' decode under numpy 2.
pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy:DeprecationWarning"
)


def files(root):
    """{relative path: bytes} of every file under ``root``."""
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = osp.join(folder, name)
            with open(path, 'rb') as f:
                out[osp.relpath(path, root)] = f.read()
    return out


def read_png(path):
    return np.asarray(Image.open(path))


def decode(segmentation):
    from pycocotools import mask as mask_utils

    return mask_utils.decode(segmentation).astype(bool)


@pytest.fixture(scope='module')
def dense_root(fashion_mnist_root, tmp_path_factory):
    root = str(tmp_path_factory.mktemp('dense') / 'dense_fashion_mnist')
    dense.make_dense_fashion_mnist(fashion_mnist_root, root, **SIZES)
    return root


@pytest.mark.parametrize('module', [dense_fashion_mnist, canvas])
def test_generator_imports_only_numpy_pil_and_the_standard_library(module):
    """The generator names no dense library (nor pycocotools) at import
    time: it runs with mmcv-lite alone."""
    with open(module.__file__) as f:
        tree = ast.parse(f.read())
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top |= {a.name.split('.')[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            top.add(node.module.split('.')[0])
    assert top <= {'json', 'os', 'shutil', 'warnings', 'numpy', 'PIL'}, top


def test_same_arguments_give_identical_files(
    fashion_mnist_root, dense_root, tmp_path
):
    again = str(tmp_path / 'again')
    dense.make_dense_fashion_mnist(fashion_mnist_root, again, **SIZES)
    first, second = files(dense_root), files(again)
    assert sorted(first) == sorted(second)
    assert len(first) == 2 * (SIZES['num_train'] + SIZES['num_test']) + 3
    for name in first:
        assert first[name] == second[name], name

    other = str(tmp_path / 'other_seed')
    dense.make_dense_fashion_mnist(fashion_mnist_root, other, seed=1, **SIZES)
    assert (
        files(other)['images/train/00000.png']
        != first['images/train/00000.png']
    )


def test_a_smaller_set_is_a_prefix(fashion_mnist_root, dense_root, tmp_path):
    small = str(tmp_path / 'small')
    dense.make_dense_fashion_mnist(
        fashion_mnist_root, small, num_train=2, num_test=1
    )
    full, part = files(dense_root), files(small)
    for name in ('images/train/00001.png', 'masks/test/00000.png'):
        assert part[name] == full[name]


def check_agreement(root, split, number, min_area=20):
    """Assert that the images, masks and COCO annotations of ``split``
    agree; return the number of instances."""
    with open(osp.join(root, f'annotations/instances_{split}.json')) as f:
        coco = json.load(f)
    assert [c['id'] for c in coco['categories']] == list(range(1, 11))
    assert tuple(c['name'] for c in coco['categories']) == dense.CLASSES
    assert len(coco['images']) == number
    ids = [a['id'] for a in coco['annotations']]
    assert ids == list(range(1, len(ids) + 1))

    for info in coco['images']:
        assert (info['height'], info['width']) == (CANVAS, CANVAS)
        image = read_png(osp.join(root, 'images', split, info['file_name']))
        mask = read_png(osp.join(root, 'masks', split, info['file_name']))
        assert image.shape == mask.shape == (CANVAS, CANVAS)
        assert image.dtype == mask.dtype == np.uint8
        anns = [a for a in coco['annotations'] if a['image_id'] == info['id']]
        assert 1 <= len(anns) <= 5

        covered = np.zeros(mask.shape, bool)
        for ann in anns:
            visible = decode(ann['segmentation'])
            assert ann['iscrowd'] == 0
            assert ann['area'] == visible.sum() >= min_area
            # No two visible instance masks overlap.
            assert not (covered & visible).any()
            covered |= visible
            # The instance's pixels carry its class in the semantic mask and
            # are item foreground in the image.
            assert (mask[visible] == ann['category_id']).all()
            assert (image[visible] > 16).all()
            # The box is the tight box of the visible mask.
            rows = np.flatnonzero(visible.any(1))
            cols = np.flatnonzero(visible.any(0))
            assert ann['bbox'] == [
                cols[0],
                rows[0],
                cols[-1] - cols[0] + 1,
                rows[-1] - rows[0] + 1,
            ]
        # Per class, the instances cover exactly that class's pixels;
        # outside them the canvas is background.
        for category in range(1, 11):
            union = np.zeros(mask.shape, bool)
            for ann in anns:
                if ann['category_id'] == category:
                    union |= decode(ann['segmentation'])
            assert (union == (mask == category)).all(), category
        assert (mask[~covered] == 0).all()
        assert (image[~covered] == 0).all()
    return len(ids)


@pytest.mark.parametrize('split', ['train', 'test'])
def test_images_masks_and_annotations_agree(dense_root, split):
    check_agreement(dense_root, split, SIZES[f'num_{split}'])


def test_items_hidden_too_much_are_removed_everywhere(
    fashion_mnist_root, dense_root, tmp_path
):
    """With a large min_area some items are removed (the draws are those
    of dense_root: removing consumes no random numbers); the canvas drawn
    without them still agrees with its annotations."""
    strict = str(tmp_path / 'strict')
    dense.make_dense_fashion_mnist(
        fashion_mnist_root, strict, min_area=600, **SIZES
    )
    kept = check_agreement(strict, 'train', SIZES['num_train'], 600)
    assert kept < check_agreement(dense_root, 'train', SIZES['num_train'])


def test_meta_marks_a_complete_set(dense_root, tmp_path):
    meta = dense.read_meta(dense_root)
    assert meta['settings']['num_train'] == SIZES['num_train']
    assert meta['classes'] == list(dense.CLASSES)
    assert dense.is_complete(dense_root, **SIZES)
    assert not dense.is_complete(dense_root, seed=1, **SIZES)
    assert not dense.is_complete(dense_root, num_train=7, num_test=5)

    copy_root = tmp_path / 'copy'
    for name, data in files(dense_root).items():
        (copy_root / name).parent.mkdir(parents=True, exist_ok=True)
        (copy_root / name).write_bytes(data)
    assert dense.is_complete(str(copy_root), **SIZES)
    os.remove(copy_root / 'images/test/00004.png')
    assert not dense.is_complete(str(copy_root), **SIZES)
    os.remove(copy_root / 'meta.json')
    assert dense.read_meta(str(copy_root)) is None


def test_cli_skips_a_complete_set_and_rebuilds_otherwise(
    fashion_mnist_root, load_tool, tmp_path, capsys
):
    tool = load_tool(CLI)
    out = str(tmp_path / 'out')
    argv = [
        '--src',
        fashion_mnist_root,
        '--out',
        out,
        '--num-train',
        '2',
        '--num-test',
        '1',
    ]
    tool.main(argv)
    assert 'written to' in capsys.readouterr().out
    # A file left by a larger run is removed on rebuild.
    stale = osp.join(out, 'images', 'train', '00009.png')
    with open(stale, 'wb'):
        pass
    tool.main(argv)
    assert 'already complete' not in capsys.readouterr().out
    assert not osp.exists(stale)
    before = files(out)
    tool.main(argv)
    assert 'already complete' in capsys.readouterr().out
    assert files(out) == before

    os.remove(osp.join(out, 'meta.json'))  # an interrupted run
    tool.main(argv)
    assert 'written to' in capsys.readouterr().out
    assert files(out) == before
    tool.main(argv[:-2] + ['--num-test', '2'])
    assert len(os.listdir(osp.join(out, 'masks', 'test'))) == 2


def test_cli_passes_items_and_scale_to_the_generator(
    fashion_mnist_root, load_tool, tmp_path
):
    """--items and --scale reach the generator: meta.json records them, the
    canvases hold that many items at that size, and the same call again
    finds the set complete."""
    tool = load_tool(CLI)
    out = str(tmp_path / 'out')
    argv = ['--src', fashion_mnist_root, '--out', out, '--canvas', '40']
    argv += ['--num-train', '6', '--num-test', '2']
    argv += ['--items', '1', '1', '--scale', '1.2', '1.2']
    tool.main(argv)
    settings = dense.read_meta(out)['settings']
    assert settings['items'] == [1, 1] and settings['scale'] == [1.2, 1.2]
    with open(osp.join(out, 'annotations', 'instances_train.json')) as f:
        coco = json.load(f)
    per_image = [a['image_id'] for a in coco['annotations']]
    assert sorted(per_image) == list(range(1, 7))  # one item per canvas
    # 34 px items (28 x 1.2): the visible box fits in them.
    assert all(max(a['bbox'][2:]) <= 34 for a in coco['annotations'])
    assert dense.is_complete(
        out,
        num_train=6,
        num_test=2,
        canvas=40,
        items=(1, 1),
        scale=(1.2, 1.2),
    )
    assert not dense.prepare_dense_fashion_mnist(
        fashion_mnist_root, out, 6, 2, 40, 0, (1, 1), (1.2, 1.2)
    )


def test_configs_name_the_classes():
    from mmpretrain.datasets.categories import FASHIONMNIST_CATEGORITES

    assert dense.CLASSES == tuple(FASHIONMNIST_CATEGORITES)
    seg = Config.fromfile(SEG_CONFIG)
    det = Config.fromfile(DET_CONFIG)
    assert tuple(seg.metainfo.classes) == dense.SEG_CLASSES
    assert len(seg.metainfo.palette) == 11
    assert tuple(det.metainfo.classes) == dense.CLASSES
    assert len(det.metainfo.palette) == 10
    for cfg in (seg, det):
        for loader in ('train_dataloader', 'val_dataloader'):
            assert cfg[loader].num_workers == 0
            assert cfg[loader].persistent_workers is False


def seg_dataset(root, loader):
    from mmseg.registry import DATASETS

    cfg = copy.deepcopy(Config.fromfile(SEG_CONFIG)[loader].dataset)
    cfg.data_root = root
    return DATASETS.build(cfg)


def det_dataset(root, loader):
    from mmdet.registry import DATASETS

    cfg = copy.deepcopy(Config.fromfile(DET_CONFIG)[loader].dataset)
    cfg.data_root = root
    return DATASETS.build(cfg)


def test_mmseg_reads_the_set(dense_root):
    pytest.importorskip('mmseg')
    from mmengine.registry import init_default_scope

    init_default_scope('mmseg')
    train = seg_dataset(dense_root, 'train_dataloader')
    assert len(train) == SIZES['num_train']
    assert train.metainfo['classes'] == dense.SEG_CLASSES
    assert train.reduce_zero_label is False
    for index in range(len(train)):
        sample = train[index]
        inputs, gt = sample['inputs'], sample['data_samples'].gt_sem_seg.data
        assert tuple(inputs.shape) == (1, CANVAS, CANVAS)
        assert tuple(gt.shape) == (1, CANVAS, CANVAS)
        assert int(gt.max()) <= 10

    test = seg_dataset(dense_root, 'val_dataloader')
    assert len(test) == SIZES['num_test']
    for index in range(len(test)):
        sample = test[index]
        name = f'{index:05d}.png'
        image = read_png(osp.join(dense_root, 'images/test', name))
        mask = read_png(osp.join(dense_root, 'masks/test', name))
        assert (sample['inputs'][0].numpy() == image).all()
        gt = sample['data_samples'].gt_sem_seg.data[0].numpy()
        assert (gt == mask).all()


def test_mmdet_reads_the_set(dense_root):
    pytest.importorskip('mmdet')
    from mmengine.registry import init_default_scope

    init_default_scope('mmdet')
    train = det_dataset(dense_root, 'train_dataloader')
    assert len(train) == SIZES['num_train']
    sample = train[0]
    assert tuple(sample['inputs'].shape) == (1, CANVAS, CANVAS)
    assert len(sample['data_samples'].gt_instances) >= 1

    test = det_dataset(dense_root, 'val_dataloader')
    with open(osp.join(dense_root, 'annotations/instances_test.json')) as f:
        coco = json.load(f)
    for index in range(len(test)):
        sample = test[index]
        assert tuple(sample['inputs'].shape) == (1, CANVAS, CANVAS)
        # The heads map predictions back with it.
        assert sample['data_samples'].scale_factor == (1.0, 1.0)
        image_id = sample['data_samples'].img_id
        anns = [a for a in coco['annotations'] if a['image_id'] == image_id]
        gt = sample['data_samples'].gt_instances
        x, y, w, h = np.array([a['bbox'] for a in anns]).T
        assert np.allclose(
            gt.bboxes.numpy(), np.stack([x, y, x + w, y + h], 1)
        )
        assert gt.labels.tolist() == [a['category_id'] - 1 for a in anns]
        masks = np.stack([decode(a['segmentation']) for a in anns])
        assert (gt.masks.masks.astype(bool) == masks).all()


def test_iou_metric_scores_the_ground_truth_100(dense_root):
    pytest.importorskip('mmseg')
    from mmengine.registry import init_default_scope
    from mmseg.registry import METRICS

    init_default_scope('mmseg')
    test = seg_dataset(dense_root, 'val_dataloader')
    metric = METRICS.build(Config.fromfile(SEG_CONFIG).val_evaluator)
    metric.dataset_meta = test.metainfo
    for index in range(len(test)):
        gt = test[index]['data_samples'].gt_sem_seg.data
        metric.process(
            {},
            [dict(pred_sem_seg=dict(data=gt), gt_sem_seg=dict(data=gt))],
        )
    assert metric.evaluate(len(test))['mIoU'] == 100.0


def test_coco_metric_scores_the_ground_truth_1(dense_root):
    pytest.importorskip('mmdet')
    import torch
    from mmdet.registry import METRICS
    from mmengine.registry import init_default_scope

    init_default_scope('mmdet')
    test = det_dataset(dense_root, 'val_dataloader')
    cfg = Config.fromfile(DET_CONFIG).val_evaluator
    cfg.ann_file = osp.join(dense_root, 'annotations/instances_test.json')
    metric = METRICS.build(cfg)
    metric.dataset_meta = test.metainfo
    for index in range(len(test)):
        sample = test[index]['data_samples']
        gt = sample.gt_instances
        metric.process(
            {},
            [
                dict(
                    img_id=sample.img_id,
                    ori_shape=sample.ori_shape,
                    pred_instances=dict(
                        bboxes=gt.bboxes.tensor
                        if hasattr(gt.bboxes, 'tensor')
                        else gt.bboxes,
                        scores=torch.ones(len(gt)),
                        labels=gt.labels,
                        masks=torch.from_numpy(gt.masks.masks.astype(bool)),
                    ),
                )
            ],
        )
    scores = metric.evaluate(len(test))
    assert scores['coco/bbox_mAP'] == 1.0
    assert scores['coco/segm_mAP'] == 1.0
