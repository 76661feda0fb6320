"""tools/convert.py --dataset fashion-mnist / folder: a 3-channel softmax
ViT converted, then its written config trained by tools/train.py on the
embedded Fashion-MNIST and on an image folder (grey and colour files, the
recipe's 224 px crops); a wrong folder layout is refused with the layout."""

import os
import re
import sys

import mmcv
import numpy as np
import pytest
import torch
from mmengine.config import Config
from tiny_vit import TIMM_TINY, perturbed_timm_vit
from tool_runs import run_log

# Two epochs of two 4-image batches; the recipe's warm-up and decay
# shortened to one epoch each.
SHORT_RUN = [
    'train_dataloader.dataset.indices=8',
    'train_dataloader.batch_size=4',
    'val_dataloader.dataset.indices=8',
    'val_dataloader.batch_size=4',
    'train_dataloader.num_workers=0',
    'val_dataloader.num_workers=0',
    'train_cfg.max_epochs=2',
    'param_scheduler.0.end=1',
    'param_scheduler.1.begin=1',
    'param_scheduler.1.end=2',
]


@pytest.fixture(scope='module')
def softmax_file(tmp_path_factory):
    """A 3-channel ViT (32 px, 8 px patches, width 64, 7 classes) in
    timm's layout."""
    model = perturbed_timm_vit(
        **dict(TIMM_TINY, in_chans=3, embed_dim=64, num_heads=1, num_classes=7)
    )
    path = tmp_path_factory.mktemp('softmax') / 'vit.pth'
    torch.save(
        {k: v.contiguous() for k, v in model.state_dict().items()}, path
    )
    return path


def convert(load_tool, softmax_file, out, *options):
    load_tool('tools/convert.py').main(
        [str(softmax_file), '--operator', 'relu', '--num-heads', '1']
        + ['--out', str(out), *options]
    )
    (config,) = out.glob('*.py')
    return config


def train(config, work_dir, repo_root):
    return run_log(
        [sys.executable, 'tools/train.py', str(config), '--work-dir']
        + [str(work_dir), '--cfg-options', *SHORT_RUN],
        repo_root,
        env=dict(os.environ, OMP_NUM_THREADS='1'),
    )


def test_fashion_mnist(
    load_tool, softmax_file, tmp_path, repo_root, fashion_mnist_root
):
    config = convert(
        load_tool,
        softmax_file,
        tmp_path / 'student',
        '--dataset',
        'fashion-mnist',
        '--data-root',
        fashion_mnist_root,
    )
    cfg = Config.fromfile(config)
    assert cfg.train_dataloader.dataset.data_root == fashion_mnist_root
    assert cfg.model.student.head.num_classes == 10
    # Grey images become three equal channels before the recipe's crops.
    assert cfg.train_dataloader.dataset.pipeline[0] == dict(
        type='MatchChannels', channels=3
    )
    log = train(config, tmp_path / 'work', repo_root)
    assert 'Epoch(train) [2][2/2]' in log
    assert 'Epoch(val) [2][2/2]' in log and 'accuracy/top1' in log


def image_folder(root, classes=('boot', 'shirt'), splits=('train', 'val')):
    """Four 40 px images a class and split, grey and colour PNGs."""
    rng = np.random.default_rng(0)
    for split in splits:
        for name in classes:
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(4):
                shape = (40, 40) if i % 2 else (40, 40, 3)
                image = rng.integers(0, 256, shape, dtype=np.uint8)
                mmcv.imwrite(image, str(folder / f'{i}.png'))
    return root


def test_image_folder(load_tool, softmax_file, tmp_path, repo_root):
    root = image_folder(tmp_path / 'images')
    config = convert(
        load_tool,
        softmax_file,
        tmp_path / 'student',
        '--dataset',
        'folder',
        '--data-root',
        str(root),
    )
    assert config.name == 'vit-c64-l2-p8_relu_mlpcopy-distill_folder.py'
    cfg = Config.fromfile(config)
    assert cfg.model.student.head.num_classes == 2
    assert cfg.model.teacher.head.num_classes == 7  # the file's own head
    assert cfg.data_preprocessor.num_classes == 2
    assert cfg.val_evaluator.topk == cfg.test_evaluator.topk == (1,)
    assert cfg.val_dataloader.dataset.data_root == str(root)
    log = train(config, tmp_path / 'work', repo_root)
    assert 'Epoch(train) [2][2/2]' in log
    assert 'Epoch(val) [2][2/2]' in log and 'accuracy/top1' in log


@pytest.mark.parametrize(
    'layout, message',
    [
        (None, 'needs --data-root DIR'),
        (dict(splits=('train',)), r'val, which does not exist: lay the'),
        (dict(classes=('boot',)), 'has 1 class folders; a classifier needs'),
        ('mismatch', r'hold different class folders \(coat, shirt in one'),
    ],
)
def test_bad_image_folder_is_refused_with_the_layout(
    layout, message, load_tool, softmax_file, tmp_path, capsys
):
    options = ['--dataset', 'folder']
    root = tmp_path / 'images'
    if layout == 'mismatch':
        image_folder(root, splits=('train',))
        image_folder(root / 'other', classes=('boot', 'coat'), splits=('val',))
        (root / 'other' / 'val').rename(root / 'val')
    elif layout is not None:
        image_folder(root, **layout)
    if layout is not None:
        options += ['--data-root', str(root)]
    with pytest.raises(SystemExit):
        convert(load_tool, softmax_file, tmp_path / 'student', *options)
    error = capsys.readouterr().err
    assert re.search(message, error), error
