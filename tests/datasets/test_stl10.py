"""STL10 reads the official binary release, written here byte by byte."""

import os.path as osp

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import DATASETS

import mmlvit  # noqa: F401  (registers STL10)

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SIDE = 96


def write_split(root, split, images_rgb, labels):
    """Write (N, 96, 96, 3) RGB images and 1..10 labels as the official
    ``{split}_X.bin`` / ``{split}_y.bin``: the value of channel c at row y,
    column x of image n sits at byte n*27648 + c*9216 + x*96 + y."""
    folder = root / 'stl10_binary'
    folder.mkdir(parents=True, exist_ok=True)
    c, y, x = np.meshgrid(
        np.arange(3), np.arange(SIDE), np.arange(SIDE), indexing='ij'
    )
    offsets = (c * SIDE * SIDE + x * SIDE + y).ravel()
    raw = np.zeros((len(images_rgb), 3 * SIDE * SIDE), np.uint8)
    for n, image in enumerate(images_rgb):
        raw[n, offsets] = image[y.ravel(), x.ravel(), c.ravel()]
    (folder / f'{split}_X.bin').write_bytes(raw.tobytes())
    (folder / f'{split}_y.bin').write_bytes(
        np.asarray(labels, np.uint8).tobytes()
    )


def build(root, **kwargs):
    init_default_scope('mmpretrain')
    return DATASETS.build(dict(type='STL10', data_root=str(root), **kwargs))


@pytest.fixture
def images():
    return np.random.default_rng(0).integers(
        0, 256, (3, SIDE, SIDE, 3), dtype=np.uint8
    )


@pytest.mark.parametrize('split', ['train', 'test'])
def test_reads_images_bgr_and_labels_from_zero(tmp_path, images, split):
    write_split(tmp_path, split, images, [1, 10, 3])
    dataset = build(tmp_path, split=split)
    assert len(dataset) == 3
    assert dataset.test_mode == (split == 'test')
    assert [dataset.get_data_info(i)['gt_label'] for i in range(3)] == [
        0,
        9,
        2,
    ]
    for i in range(3):
        img = dataset.get_data_info(i)['img']
        assert img.shape == (SIDE, SIDE, 3) and img.dtype == np.uint8
        np.testing.assert_array_equal(img, images[i][..., ::-1])


def test_single_pixel_lands_at_its_row_and_column(tmp_path):
    image = np.zeros((1, SIDE, SIDE, 3), np.uint8)
    image[0, 10, 70, 0] = 255  # red, row 10, column 70
    write_split(tmp_path, 'train', image, [4])
    img = build(tmp_path).get_data_info(0)['img']
    assert img[10, 70, 2] == 255  # BGR: red is the last channel
    assert img.sum() == 255


def test_class_names(tmp_path, images):
    write_split(tmp_path, 'train', images, [1, 2, 3])
    assert build(tmp_path).CLASSES[:3] == ('airplane', 'bird', 'car')
    names = [f'class{i}' for i in range(10)]
    (tmp_path / 'stl10_binary' / 'class_names.txt').write_text(
        '\n'.join(names) + '\n'
    )
    assert list(build(tmp_path).CLASSES) == names
    (tmp_path / 'stl10_binary' / 'class_names.txt').write_text('a\nb\n')
    with pytest.raises(ValueError, match='lists 2 class names'):
        build(tmp_path)


def test_pipeline_gives_224px_inputs(tmp_path, images):
    write_split(tmp_path, 'train', images, [1, 2, 3])
    dataset = build(
        tmp_path,
        pipeline=[
            dict(type='RandomResizedCrop', scale=224),
            dict(type='PackInputs'),
        ],
    )
    item = dataset[1]
    assert tuple(item['inputs'].shape) == (3, 224, 224)
    assert item['data_samples'].gt_label.tolist() == [1]


def test_missing_file_names_it_and_the_root(tmp_path, images):
    with pytest.raises(FileNotFoundError) as err:
        build(tmp_path / 'nowhere')
    assert 'train_X.bin' in str(err.value)
    assert 'data_root' in str(err.value)
    assert 'nowhere' in str(err.value)
    write_split(tmp_path, 'train', images, [1, 2, 3])
    with pytest.raises(FileNotFoundError, match='test_X.bin'):
        build(tmp_path, split='test')


def test_rejects_bad_files_and_split(tmp_path, images):
    write_split(tmp_path, 'train', images, [1, 2, 3, 4])
    with pytest.raises(ValueError, match='expected 4 images'):
        build(tmp_path)
    write_split(tmp_path, 'train', images, [1, 0, 3])
    with pytest.raises(ValueError, match='1..10'):
        build(tmp_path)
    with pytest.raises(ValueError, match='split'):
        build(tmp_path, split='unlabeled')


def test_stl10_config_trains_and_tests_on_synthetic_files(tmp_path, images):
    """configs/_base_/datasets/stl10_lvit.py, pointed at synthetic files."""
    cfg = Config.fromfile(
        osp.join(ROOT, 'configs/_base_/datasets/stl10_lvit.py')
    )
    write_split(tmp_path, 'train', images, [1, 2, 3])
    write_split(tmp_path, 'test', images[:2], [4, 5])
    init_default_scope('mmpretrain')
    for loader, labels in (
        ('train_dataloader', [0, 1, 2]),
        ('test_dataloader', [3, 4]),
    ):
        dataset = DATASETS.build(
            dict(cfg[loader].dataset, data_root=str(tmp_path))
        )
        items = [dataset[i] for i in range(len(dataset))]
        assert [it['data_samples'].gt_label.item() for it in items] == labels
        assert all(tuple(it['inputs'].shape) == (3, 224, 224) for it in items)
