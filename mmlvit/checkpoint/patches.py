"""The project's changes to mmengine and torch, installed in one place.

``import mmlvit`` calls :func:`install` once. It changes three global
settings, each for checkpoint files:

1. torch's unpickling allow-list (``torch.serialization.add_safe_globals``)
   gets :data:`~mmlvit.checkpoint.loading.SAFE_GLOBALS`: mmengine 0.10.x
   stores a ``HistoryBuffer``, numpy arrays/scalars and, in FSDP folders,
   sharded-tensor metadata in its checkpoints, which torch's
   ``weights_only`` loading refuses otherwise. ``weights_only`` stays on.
2. mmengine's ``CheckpointLoader`` scheme ``''`` (local paths) reads with
   :func:`~mmlvit.checkpoint.loading.load_checkpoint_file`, so that
   ``load_from``, ``--resume`` and ``init_cfg=dict(type='Pretrained')``
   load safely and fail with messages that name the file and the fix.
3. mmengine's file backend ``'local'`` (and paths without a prefix) is
   :class:`~mmlvit.checkpoint.atomic_files.AtomicLocalBackend`: every file
   the runner saves is written to a temporary file and renamed, so a kill
   during a save never leaves a truncated checkpoint.

Installing again changes nothing. Besides these, ``mmlvit.engine``
registers classes under mmengine's own registry names (``force=True``):
``Pretrained`` (``engine/pretrained_init.py``), ``FlexibleRunner`` and
``FSDPStrategy`` (``engine/runners/fsdp.py``), and ``AmpOptimWrapper`` in
mmpretrain's registry (``engine/optimizers/skip_nonfinite.py``).
"""

from mmengine.fileio.backends import register_backend
from mmengine.runner.checkpoint import CheckpointLoader

from .atomic_files import AtomicLocalBackend
from .loading import load_checkpoint_file, register_safe_globals

LOCAL_PREFIX = ''  # mmengine's key for paths without a scheme


def load_local(filename, map_location):
    """mmengine's loader for local paths (``CheckpointLoader`` scheme
    ``''``): :func:`load_checkpoint_file`."""
    return load_checkpoint_file(filename, map_location)


def install():
    """Install the three patches listed in the module docstring."""
    register_safe_globals()
    CheckpointLoader.register_scheme(
        prefixes=LOCAL_PREFIX, loader=load_local, force=True
    )
    register_backend(
        'local', AtomicLocalBackend, force=True, prefixes=LOCAL_PREFIX
    )


__all__ = ['install', 'load_local']
