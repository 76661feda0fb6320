"""Checkpoint files: safe reading, atomic writing, sharded folders, best
files, resume state and the work-directory lock."""

from .loading import (
    SAFE_GLOBALS,
    CheckpointError,
    UnsafeCheckpointError,
    first_few,
    install,
    load_checkpoint_file,
    register_safe_globals,
    shape_text,
)

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
