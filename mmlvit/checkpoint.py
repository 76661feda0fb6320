"""Safe reading of checkpoint files.

torch >= 2.6 unpickles with ``weights_only=True``: only tensors, containers and
allow-listed types may appear in a file, so a malicious pickle cannot run code.
mmengine 0.10.x stores a few non-tensor objects in its checkpoints (the
message hub's ``HistoryBuffer`` and numpy arrays/scalars). They are
allow-listed here, one by one; ``weights_only`` is never turned off.

``load_checkpoint_file`` reads ``.pth``/``.pt``/``.bin`` pickles and
``.safetensors`` files and turns the low-level failures (refused pickle,
truncated zip, missing file) into errors that name the file and the fix.
It also serves mmengine's local-path scheme, so ``load_from``, ``--resume``
and ``init_cfg=dict(type='Pretrained')`` get the same checks and messages.
"""

import os.path as osp
import pickle
import zipfile

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.runner.checkpoint import CheckpointLoader


class CheckpointError(RuntimeError):
    """A checkpoint file cannot be read: missing, corrupt or of the wrong
    layout."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint file pickles objects that could execute code on load."""


def _numpy_safe_globals():
    multiarray = np._core.multiarray
    types = [np.ndarray, np.dtype, multiarray._reconstruct, multiarray.scalar]
    types += [t for t in vars(np.dtypes).values() if isinstance(t, type)]
    types += [
        np.bool_,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float16,
        np.float32,
        np.float64,
        np.complex64,
        np.complex128,
    ]
    # Files written under numpy 1.x name the functions by their old module.
    types += [
        (multiarray._reconstruct, 'numpy.core.multiarray._reconstruct'),
        (multiarray.scalar, 'numpy.core.multiarray.scalar'),
    ]
    return types


def _history_buffer_getattr(obj, name):
    """Stand-in for ``getattr`` while unpickling.

    A pickled ``HistoryBuffer`` carries its statistics methods as
    ``getattr(HistoryBuffer, 'mean')``. Allow-listing the real ``getattr``
    would let a crafted file reach any attribute of any allowed object (and
    from there arbitrary code), so only that exact lookup is served.
    """
    statistics = {'min', 'max', 'current', 'mean'}
    statistics.update(HistoryBuffer._statistics_methods)
    if obj is HistoryBuffer and name in statistics:
        return getattr(HistoryBuffer, name)
    raise pickle.UnpicklingError(
        f'getattr({obj!r}, {name!r}) is not allowed while loading a checkpoint'
    )


SAFE_GLOBALS = (
    [HistoryBuffer]
    + _numpy_safe_globals()
    + [
        (_history_buffer_getattr, '__builtin__.getattr'),
        (_history_buffer_getattr, 'builtins.getattr'),
    ]
)


def register_safe_globals():
    """Allow-list the non-tensor types that mmengine writes in checkpoints."""
    torch.serialization.add_safe_globals(SAFE_GLOBALS)


def load_checkpoint_file(filename, map_location='cpu'):
    """Read a checkpoint file safely.

    Args:
        filename (str): Path of a ``.pth``/``.pt``/``.bin`` (torch pickle) or
            ``.safetensors`` file.
        map_location (str | torch.device | callable): As in
            :func:`torch.load`. Defaults to 'cpu'.

    Returns:
        dict: The file's content (for safetensors, a flat state dict).

    Raises:
        FileNotFoundError: The file does not exist.
        UnsafeCheckpointError: The pickle holds objects outside the
            allow-list (reading it could execute code).
        CheckpointError: The file is truncated, corrupt or not a checkpoint.
    """
    filename = osp.expanduser(str(filename))
    if not osp.isfile(filename):
        raise FileNotFoundError(f'Checkpoint file not found: {filename}')
    if filename.endswith('.safetensors'):
        return _load_safetensors(filename, map_location)
    try:
        return torch.load(
            filename, map_location=map_location, weights_only=True
        )
    except pickle.UnpicklingError as err:
        if 'Weights only load failed' in str(err):
            detail = str(err).split('\n')
            culprit = next(
                (
                    line.strip()
                    for line in detail
                    if 'Unsupported global' in line
                    or 'Unsupported operand' in line
                ),
                detail[0],
            )
            raise UnsafeCheckpointError(
                f'Refused to load {filename}: it pickles objects that are '
                f'not plain tensors or allow-listed types ({culprit}), and '
                'unpickling them could execute code. Nothing from the file '
                'was run. If the file comes from a source you trust, '
                're-save its tensors (e.g. as .safetensors or a dict of '
                'tensors) and load that instead.'
            ) from err
        raise CheckpointError(
            f'Cannot read checkpoint {filename}: the file is corrupt or is '
            f'not a torch checkpoint ({err}).'
        ) from err
    except (
        RuntimeError,
        EOFError,
        zipfile.BadZipFile,
        OSError,
        ValueError,
    ) as err:
        raise CheckpointError(
            f'Cannot read checkpoint {filename}: the file is truncated or '
            f'corrupt ({type(err).__name__}: {err}). Re-download or re-save '
            'it.'
        ) from err


def _load_safetensors(filename, map_location):
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    device = map_location if isinstance(map_location, str) else 'cpu'
    try:
        return load_file(filename, device=device)
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(
            f'Cannot read safetensors file {filename}: the file is truncated '
            f'or corrupt ({err}).'
        ) from err


def _load_from_local(filename, map_location):
    return load_checkpoint_file(filename, map_location)


def install():
    """Allow-list mmengine's types and route mmengine's local checkpoint
    reading through :func:`load_checkpoint_file`."""
    register_safe_globals()
    CheckpointLoader.register_scheme(
        prefixes='', loader=_load_from_local, force=True
    )
