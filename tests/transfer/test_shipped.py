"""Shipped files named by relative paths (the tiny teacher in configs) are
found from any working directory: in the checkout, and in an installed
package's ``mmlvit/.mim`` copy."""

import os.path as osp

import pytest
import torch

from mmlvit.transfer import load_softmax_checkpoint, shipped

TEACHER = 'checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth'


def test_shipped_teacher_loads_from_another_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not osp.exists(TEACHER)
    state = load_softmax_checkpoint(TEACHER)
    assert 'backbone.patch_embed.projection.weight' in state


def test_installed_copy_is_found_and_missing_files_are_named(
    tmp_path, monkeypatch
):
    package_copy = tmp_path / 'site' / 'mmlvit' / '.mim'
    (package_copy / 'checkpoints').mkdir(parents=True)
    torch.save({'a': torch.zeros(1)}, package_copy / 'checkpoints' / 'x.pth')
    monkeypatch.setattr(shipped, 'SHIPPED_ROOTS', (str(package_copy),))
    monkeypatch.chdir(tmp_path)
    assert shipped.shipped_path('checkpoints/x.pth') == str(
        package_copy / 'checkpoints' / 'x.pth'
    )
    # A file in the working directory wins over the shipped one.
    (tmp_path / 'checkpoints').mkdir()
    torch.save({'a': torch.ones(1)}, tmp_path / 'checkpoints' / 'x.pth')
    assert shipped.shipped_path('checkpoints/x.pth') == 'checkpoints/x.pth'
    # Absolute and unknown paths are left to the reader, which names them.
    assert shipped.shipped_path('/nowhere/x.pth') == '/nowhere/x.pth'
    with pytest.raises(FileNotFoundError, match='checkpoints/missing.pth'):
        load_softmax_checkpoint('checkpoints/missing.pth')
