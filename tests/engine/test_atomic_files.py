"""atomic_write keeps the old file whole when a write fails (e.g. a full
disk), and is mmengine's backend for local paths once mmlvit is imported."""

import errno
import os

import pytest
from mmengine.fileio import get_file_backend

import mmlvit  # noqa: F401
from mmlvit.checkpoint import atomic_files


def test_failed_write_leaves_the_old_file_and_no_temp_file(
    tmp_path, monkeypatch
):
    path = tmp_path / 'epoch_1.pth'
    path.write_bytes(b'old complete checkpoint')

    def disk_full(file, data):
        file.write(data[:3])
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(atomic_files, 'write_all', disk_full)
    with pytest.raises(OSError, match='No space left'):
        atomic_files.atomic_write(path, b'new checkpoint')
    assert path.read_bytes() == b'old complete checkpoint'
    assert os.listdir(tmp_path) == ['epoch_1.pth']


def test_mmengine_local_backend_writes_atomically(tmp_path, monkeypatch):
    backend = get_file_backend(str(tmp_path))
    assert isinstance(backend, atomic_files.AtomicLocalBackend)
    seen = []

    def record(file, data):
        seen.append(os.listdir(tmp_path))
        file.write(data)

    monkeypatch.setattr(atomic_files, 'write_all', record)
    backend.put(b'bytes', str(tmp_path / 'a.pth'))
    backend.put_text('text', str(tmp_path / 'last_checkpoint'))
    # While a file is written, only its hidden temporary file exists.
    assert seen[0] == [f'.a.pth.{os.getpid()}.tmp']
    assert sorted(seen[1]) == [
        '.last_checkpoint.%d.tmp' % os.getpid(),
        'a.pth',
    ]
    assert (tmp_path / 'a.pth').read_bytes() == b'bytes'
    assert (tmp_path / 'last_checkpoint').read_text() == 'text'
    assert sorted(os.listdir(tmp_path)) == ['a.pth', 'last_checkpoint']
