"""Atomic writes for every file mmengine puts on the local disk.

mmengine 0.10.x writes checkpoints in place under their final names
(``open(path, 'wb')``): a kill or a full disk during the write leaves a
truncated ``epoch_N.pth`` that ``--resume`` later trips over, possibly the
file that held the last good state. Here a file is written to a temporary
file in the same folder, flushed to disk and only then renamed over its
final name (``os.replace`` is atomic on POSIX and Windows): a reader sees the
old complete file or the new complete file, never a part.

:class:`AtomicLocalBackend` is mmengine's backend for local paths
(:mod:`mmlvit.checkpoint.patches`), so ``save_checkpoint`` (every checkpoint
the runner saves) and any other ``put``/``put_text`` get it;
:class:`~mmlvit.engine.hooks.SafeCheckpointHook` writes ``last_checkpoint``
with :func:`atomic_write` too.
"""

import glob
import os
import os.path as osp

from mmengine.fileio.backends import LocalBackend

TEMP_SUFFIX = '.tmp'


def temp_path(path):
    """The temporary file a write of ``path`` goes through:
    ``folder/.name.<pid>.tmp`` (hidden, unique per process)."""
    folder, name = osp.split(osp.abspath(path))
    return osp.join(folder, f'.{name}.{os.getpid()}{TEMP_SUFFIX}')


def leftover_temp_files(folder):
    """Temporary files of writes that were killed before their rename."""
    found = glob.glob(osp.join(folder, f'.*.*{TEMP_SUFFIX}'))
    return sorted(path for path in found if osp.isfile(path))


def write_all(file, data):
    """Write ``data`` (bytes or str) to the open ``file``."""
    file.write(data)


def atomic_write(path, data, encoding='utf-8'):
    """Write ``data`` to ``path`` so that ``path`` is never seen half written.

    Args:
        path (str | os.PathLike): The final file name; its folder is created
            if missing.
        data (bytes | str): The content; ``str`` is encoded with
            ``encoding``.
        encoding (str): Text encoding. Defaults to 'utf-8'.
    """
    path = os.fspath(path)
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    if isinstance(data, str):
        data = data.encode(encoding)
    tmp = temp_path(path)
    try:
        with open(tmp, 'wb') as file:
            write_all(file, data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise
    sync_folder(osp.dirname(osp.abspath(path)))


def sync_folder(folder):
    """Make the rename itself durable (POSIX; a no-op where folders cannot
    be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class AtomicLocalBackend(LocalBackend):
    """mmengine's local file backend whose ``put``/``put_text`` write
    atomically (see :func:`atomic_write`); reading is unchanged."""

    def put(self, obj, filepath):
        atomic_write(filepath, obj)

    def put_text(self, obj, filepath, encoding='utf-8'):
        atomic_write(filepath, obj, encoding=encoding)
