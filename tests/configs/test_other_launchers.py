"""The shipped configs are valid for launchers other than tools/train.py.

mmpretrain's own tools/train.py (what `mim train mmpretrain CONFIG` runs)
fills every dataloader with ``persistent_workers=True`` unless the config
states it; torch refuses that without worker processes. Configs that load
in the main process must therefore say ``persistent_workers=False``.
"""

import argparse
import glob
import importlib.util
import os
import os.path as osp
import subprocess

import mmpretrain
import pytest
from mmengine.config import Config

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIGS = sorted(
    osp.relpath(p, ROOT)
    for pattern in ('configs/**/*.py', 'tests/data/configs/*.py')
    for p in glob.glob(osp.join(ROOT, pattern), recursive=True)
    if '_base_' not in p
)
LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')
TINY = 'tests/data/configs/tiny_softmax_fmnist.py'


def mmpretrain_merge_args():
    """``merge_args`` of the tools/train.py that mmpretrain's package ships
    (the script `mim train mmpretrain` runs)."""
    path = osp.join(
        osp.dirname(mmpretrain.__file__), '.mim', 'tools', 'train.py'
    )
    spec = importlib.util.spec_from_file_location('mmpretrain_train', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.merge_args


def default_args(config):
    """The namespace mmpretrain's parser gives for `train.py CONFIG`."""
    return argparse.Namespace(
        config=config,
        work_dir=None,
        resume=None,
        amp=False,
        no_validate=False,
        auto_scale_lr=False,
        no_pin_memory=False,
        no_persistent_workers=False,
        cfg_options=None,
        launcher='none',
    )


def test_worker_free_loaders_are_valid_under_mmpretrain_defaults():
    merge_args = mmpretrain_merge_args()
    checked, invalid = 0, []
    for path in CONFIGS:
        # Test plugins named in custom_imports need not be importable here.
        cfg = Config.fromfile(
            osp.join(ROOT, path), import_custom_modules=False
        )
        cfg = merge_args(cfg, default_args(path))
        for field in LOADERS:
            loader = cfg.get(field)
            if loader is None or loader.get('num_workers', 0) > 0:
                continue
            checked += 1
            # torch.utils.data.DataLoader's own rule.
            if loader.persistent_workers:
                invalid.append(f'{path}: {field}')
    assert checked >= 9  # the Fashion-MNIST/MNIST-5k and test configs
    assert not invalid, (
        'persistent_workers option needs num_workers > 0 (torch) in: '
        + ', '.join(invalid)
    )


@pytest.mark.usefixtures('fashion_mnist_root')
def test_mim_train_mmpretrain_runs_a_tiny_config(tmp_path, repo_root, python):
    """README's path for editable installs (the tiny config's 8
    iterations)."""
    env = dict(
        os.environ,
        PATH=osp.dirname(python) + os.pathsep + os.environ['PATH'],
        OMP_NUM_THREADS='1',
    )
    out = subprocess.run(
        [
            'mim',
            'train',
            'mmpretrain',
            TINY,
            '--work-dir',
            str(tmp_path),
        ],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    assert 'mmpretrain/.mim/tools/train.py' in log
    assert 'Epoch(train) [2][4/4]' in log
    assert (tmp_path / 'epoch_2.pth').is_file()
