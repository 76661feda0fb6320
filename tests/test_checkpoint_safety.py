"""Checkpoints load safely (weights_only + allow-list) with clear errors."""

import os
import subprocess

import pytest
import torch
from mmengine.logging import HistoryBuffer
from mmengine.runner import CheckpointLoader

from mmlvit.checkpoint import (
    CheckpointError,
    UnsafeCheckpointError,
    load_checkpoint_file,
)


class _RunsCode:
    """Unpickling this object runs a shell command (a marker file)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


def test_mmengine_objects_load(tmp_path):
    import numpy as np

    buffer = HistoryBuffer()
    buffer.update(1.5)
    path = tmp_path / 'ok.pth'
    torch.save(
        dict(
            state_dict={'w': torch.ones(2)},
            message_hub=dict(log_scalars={'loss': buffer}),
            meta=dict(seed=np.int64(3), arr=np.arange(3)),
        ),
        path,
    )
    ckpt = load_checkpoint_file(path)
    assert ckpt['message_hub']['log_scalars']['loss'].mean() == 1.5
    assert ckpt['meta']['seed'] == 3


def test_code_executing_pickle_is_refused(tmp_path):
    marker = tmp_path / 'pwned'
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {}, 'payload': _RunsCode(marker)}, path)
    with pytest.raises(UnsafeCheckpointError, match='evil.pth'):
        load_checkpoint_file(path)
    # mmengine's own loader (load_from, --resume, init_cfg) is routed too.
    with pytest.raises(UnsafeCheckpointError, match='Refused'):
        CheckpointLoader.load_checkpoint(str(path))
    assert not marker.exists()


def test_getattr_gadget_is_refused(tmp_path):
    # A pickle that calls getattr on an allowed object to climb to code
    # execution: only HistoryBuffer's statistics lookups are served.
    marker = tmp_path / 'pwned'
    data = (
        b'\x80\x02c__builtin__\ngetattr\nq\x00cnumpy\nndarray\n'
        b'X\t\x00\x00\x00__class__\x86R.'
    )
    path = tmp_path / 'gadget.pkl'
    path.write_bytes(data)
    with pytest.raises(UnsafeCheckpointError):
        load_checkpoint_file(path)
    assert not marker.exists()


def test_truncated_checkpoint(tmp_path):
    path = tmp_path / 'trunc.pth'
    torch.save({'state_dict': {'w': torch.randn(100, 100)}}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match='trunc.pth'):
        load_checkpoint_file(path)


def test_garbage_and_missing_files(tmp_path):
    path = tmp_path / 'garbage.pth'
    path.write_bytes(b'not a checkpoint at all')
    with pytest.raises(CheckpointError, match='garbage.pth'):
        load_checkpoint_file(path)
    with pytest.raises(FileNotFoundError, match='missing.pth'):
        load_checkpoint_file(tmp_path / 'missing.pth')


def test_safetensors(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / 'w.safetensors'
    save_file({'w': torch.arange(4.0)}, str(path))
    assert torch.equal(load_checkpoint_file(path)['w'], torch.arange(4.0))
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(CheckpointError, match='w.safetensors'):
        load_checkpoint_file(path)


def test_weights_only_default_stays_on(tmp_path, python):
    # After `import mmlvit`, a plain torch.load still refuses code.
    marker = tmp_path / 'pwned'
    path = tmp_path / 'evil.pth'
    torch.save({'payload': _RunsCode(marker)}, path)
    script = f'import mmlvit, torch\ntorch.load({str(path)!r})'
    out = subprocess.run(
        [python, '-c', script], capture_output=True, text=True
    )
    assert out.returncode != 0
    assert 'Weights only load failed' in out.stderr
    assert not marker.exists()
