"""Checkpoint files, read and written safely.

- ``loading``: reading with ``weights_only`` and an allow-list, errors that
  name the file and the fix.
- ``atomic_files``: every file complete or absent (temporary file, rename).
- ``sharded``: FSDP checkpoint folders written as a whole or not at all.
- ``best``: the best checkpoints (``save_best``) kept true across kills.
- ``resume``, ``resume_state``: which checkpoint ``--resume`` continues
  from, and what it must hold.
- ``preemption``: a resumable checkpoint when a signal stops training.
- ``work_dir_lock``: one live training run per work directory.
- ``patches``: the changes to mmengine and torch that ``import mmlvit``
  installs.

Imports only torch, mmengine, the standard library and ``mmlvit.utils``,
so that every layer of mmlvit can read and write checkpoints through it.
"""

from .loading import (
    SAFE_GLOBALS,
    CheckpointError,
    UnsafeCheckpointError,
    first_few,
    load_checkpoint_file,
    register_safe_globals,
    shape_text,
)
from .patches import install

__all__ = [
    'SAFE_GLOBALS',
    'CheckpointError',
    'UnsafeCheckpointError',
    'first_few',
    'install',
    'load_checkpoint_file',
    'register_safe_globals',
    'shape_text',
]
