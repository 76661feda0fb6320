"""Damaged Fashion-MNIST IDX files (copies in tmp dirs) are named with what
is wrong before training, instead of mmpretrain's reshape error or bare
assertion."""

import gzip
import os
import os.path as osp
import struct
import subprocess

import pytest

from mmlvit.datasets import DatasetFileError, check_data_roots
from mmlvit.utils.logs import read_config

CONFIG = 'tests/data/configs/tiny_softmax_fmnist.py'
NAMES = (
    'train-images-idx3-ubyte',
    'train-labels-idx1-ubyte',
    't10k-images-idx3-ubyte',
    't10k-labels-idx1-ubyte',
)


@pytest.fixture
def data_root(tmp_path, fashion_mnist_root):
    """Links to the intact files; a test replaces one with a damaged copy."""
    root = tmp_path / 'fmnist'
    root.mkdir()
    for name in NAMES:
        os.symlink(osp.join(fashion_mnist_root, name), root / name)
    return root


def replace(root, name, data):
    os.remove(root / name)
    (root / name).write_bytes(data)


def intact(name, fashion_mnist_root):
    with open(osp.join(fashion_mnist_root, name), 'rb') as file:
        return file.read()


def config_for(repo_root, root):
    cfg = read_config(osp.join(repo_root, CONFIG))
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = str(root)
    return cfg


def labels_file(values):
    return struct.pack('>II', 0x801, len(values)) + bytes(values)


def damaged_message(repo_root, root):
    with pytest.raises(DatasetFileError) as err:
        check_data_roots(config_for(repo_root, root))
    return str(err.value)


def test_intact_files_pass(repo_root, data_root):
    check_data_roots(config_for(repo_root, data_root))


@pytest.mark.parametrize(
    'name, damage, expected',
    [
        (
            'train-images-idx3-ubyte',
            lambda data: data[:999_984],
            '{path} is 999,984 bytes, but its header announces 60,000 images '
            'of 28x28 (47,040,016 bytes): it is truncated',
        ),
        (
            'train-images-idx3-ubyte',
            lambda data: data + b'\0' * 784,
            '{path} is 47,040,800 bytes, but its header announces 60,000 '
            'images of 28x28 (47,040,016 bytes): it is longer than that',
        ),
        (
            'train-images-idx3-ubyte',
            lambda data: b'label,pixel1,pixel2\n9,0,0\n' * 10,
            '{path} is not an IDX image file: its magic number is 0x6c616265, '
            "expected 0x00000803 (first bytes b'label,pi')",
        ),
        (
            't10k-images-idx3-ubyte',
            gzip.compress,
            '{path} is gzip-compressed: extract it (gunzip)',
        ),
        (
            'train-labels-idx1-ubyte',
            lambda data: data[:4] + struct.pack('>I', 59_999) + data[8:-1],
            '{images} holds 60,000 images but {path} 59,999 labels',
        ),
        (
            'train-labels-idx1-ubyte',
            lambda data: data[:13] + bytes([12]) + data[14:],
            '{path}: label 12 of image 5 is outside 0..9',
        ),
        (
            't10k-labels-idx1-ubyte',
            lambda data: b'',
            '{path} is 0 bytes, shorter than the 8-byte header of an IDX '
            'label file: it is truncated or empty',
        ),
    ],
)
def test_damaged_file_is_named_with_what_is_wrong(
    name, damage, expected, repo_root, data_root, fashion_mnist_root
):
    replace(data_root, name, damage(intact(name, fashion_mnist_root)))
    message = damaged_message(repo_root, data_root)
    path = data_root / name
    images = data_root / name.replace('labels-idx1', 'images-idx3')
    assert expected.format(path=path, images=images) in message, message
    field = 'train' if name.startswith('train') else 'val'
    assert f'{field}_dataloader.dataset (FashionMNIST): ' in message


def test_train_tool_stops_before_training_on_a_truncated_file(
    tmp_path, repo_root, python, data_root, fashion_mnist_root
):
    name = 'train-images-idx3-ubyte'
    replace(data_root, name, intact(name, fashion_mnist_root)[:999_984])
    options = [
        f'{loader}.dataset.data_root={data_root}'
        for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader')
    ]
    out = subprocess.run(
        [python, 'tools/train.py', CONFIG, '--work-dir', str(tmp_path / 'w')]
        + ['--cfg-options']
        + options,
        cwd=repo_root,
        env=dict(os.environ, OMP_NUM_THREADS='1'),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1
    assert (
        'DatasetFileError: Damaged dataset files:\n  '
        f'train_dataloader.dataset (FashionMNIST): {data_root / name} is '
        '999,984 bytes, but its header announces 60,000 images'
    ) in out.stderr, out.stderr[-3000:]
    assert 'is invalid for input of size' not in out.stderr
    assert not (tmp_path / 'w').exists()
