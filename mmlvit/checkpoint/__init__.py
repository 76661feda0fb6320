"""Checkpoint files: safe reading, atomic writing, sharded folders, best
files, resume state and the work-directory lock.

Imports only torch, mmengine and the standard library, so that every layer
of mmlvit can read and write checkpoints through it.
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
