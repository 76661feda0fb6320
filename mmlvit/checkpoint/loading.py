"""Safe reading of checkpoint files.

torch >= 2.6 unpickles with ``weights_only=True``: only tensors, containers and
allow-listed types may appear in a file, so a malicious pickle cannot run code.
mmengine 0.10.x stores a few non-tensor objects in its checkpoints (the
message hub's ``HistoryBuffer`` and numpy arrays/scalars). They are
allow-listed here, one by one; ``weights_only`` is never turned off.

``load_checkpoint_file`` reads ``.pth``/``.pt``/``.bin`` pickles and
``.safetensors`` files and turns the low-level failures (refused pickle,
truncated zip, missing file) into errors that name the file and the fix. A
refused pickle is named by the global it asks for; bytes that are not a
pickle are a corrupt file, not an unsafe one. torch's own advice (re-run
with ``weights_only=False``) is never passed on.
It is mmengine's reader of local paths too (:mod:`mmlvit.checkpoint.patches`),
so ``load_from``, ``--resume`` and ``init_cfg=dict(type='Pretrained')`` get
the same checks and messages.
"""

import io
import os.path as osp
import pickle
import pickletools
import re
import struct
import zipfile

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from torch import _weights_only_unpickler
from torch.serialization import UNSAFE_MESSAGE


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


def _sharded_tensor_safe_globals():
    """The types in the per-rank files of an FSDP checkpoint saved with
    mmengine's default ``state_dict_cfg='local'``: ShardedTensor, its shards
    and their metadata (plain data classes; loading still needs the process
    group of the run that saved them)."""
    if not torch.distributed.is_available():
        return []
    from torch.distributed._shard.metadata import ShardMetadata
    from torch.distributed._shard.sharded_tensor import Shard, ShardedTensor
    from torch.distributed._shard.sharded_tensor.metadata import (
        MEM_FORMAT_ENCODING,
        ShardedTensorMetadata,
        TensorProperties,
    )
    from torch.distributed._shard.sharding_spec import (
        ChunkShardingSpec,
        EnumerableShardingSpec,
    )
    from torch.distributed.remote_device import _remote_device

    return [
        ShardedTensor,
        ShardedTensor.ProcessGroupState,
        Shard,
        ShardMetadata,
        ShardedTensorMetadata,
        TensorProperties,
        MEM_FORMAT_ENCODING,
        ChunkShardingSpec,
        EnumerableShardingSpec,
        _remote_device,
    ]


def _restricted_getattr(obj, name):
    """Stand-in for ``getattr`` while unpickling.

    A pickled ``HistoryBuffer`` carries its statistics methods as
    ``getattr(HistoryBuffer, 'mean')``, a sharded FSDP checkpoint its nested
    class as ``getattr(ShardedTensor, 'ProcessGroupState')``. Allow-listing
    the real ``getattr`` would let a crafted file reach any attribute of any
    allowed object (and from there arbitrary code), so only those exact
    lookups are served.
    """
    statistics = {'min', 'max', 'current', 'mean'}
    statistics.update(HistoryBuffer._statistics_methods)
    if obj is HistoryBuffer and name in statistics:
        return getattr(HistoryBuffer, name)
    # A sharded FSDP checkpoint names ShardedTensor.ProcessGroupState (an
    # allow-listed nested class) this way.
    nested = getattr(obj, name, None) if name == 'ProcessGroupState' else None
    if any(nested is allowed for allowed in SAFE_GLOBALS):
        return nested
    raise pickle.UnpicklingError(
        f'getattr({obj!r}, {name!r}) is not allowed while loading a checkpoint'
    )


SAFE_GLOBALS = (
    [HistoryBuffer]
    + _numpy_safe_globals()
    + [
        (_restricted_getattr, '__builtin__.getattr'),
        (_restricted_getattr, 'builtins.getattr'),
    ]
    # FSDP checkpoint folders (rank{i}.pth): sharded tensors and their
    # metadata, nothing callable beyond their constructors.
    + _sharded_tensor_safe_globals()
)


def shape_text(shape):
    """``'64x1x4x4'`` (``'scalar'`` for a 0-d shape), for error messages."""
    return 'x'.join(map(str, shape)) or 'scalar'


def first_few(items, limit=3):
    """``'a, b, c and 5 more'``: the first ``limit`` of a long list of
    strings, for error messages."""
    more = len(items) - limit
    return ', '.join(items[:limit]) + (f' and {more} more' if more > 0 else '')


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
        # torch's message advises turning weights_only off: it is replaced
        # (and its traceback dropped) by one that names what was refused.
        culprit = _refused_global(str(err), filename)
        if culprit is not None:
            raise UnsafeCheckpointError(
                f'Refused to load {filename}: its pickle calls {culprit}, '
                'which is neither a tensor nor an allow-listed type, and '
                'unpickling it could execute code. Nothing from the file was '
                'run. Do not load this file; if it comes from a source you '
                'trust, get its weights as .safetensors or as a plain dict of '
                'tensors instead.'
            ) from None
        reason = _unreadable_reason(str(err))
        raise CheckpointError(
            f'Cannot read checkpoint {filename}: {reason}. The file is '
            'corrupt, of another format or pickled with a protocol '
            'torch.load does not support: re-download it, or re-save it '
            'with torch.save (default protocol) or as .safetensors.'
        ) from None
    except (
        RuntimeError,
        EOFError,
        IndexError,
        KeyError,
        TypeError,
        struct.error,
        zipfile.BadZipFile,
        OSError,
        ValueError,
    ) as err:
        # Some of torch's messages (TorchScript archives) carry the same
        # advice to turn weights_only off.
        detail = str(err).replace(UNSAFE_MESSAGE, '').strip()
        raise CheckpointError(
            f'Cannot read checkpoint {filename}: the file is truncated or '
            f'corrupt ({type(err).__name__}: {detail}). Re-download or '
            're-save it.'
        ) from None


# torch's refusals of a global it would import, and of an object it would
# call (a function or class reached through an allowed global).
_REFUSED_GLOBAL = re.compile(
    r'GLOBAL (\S+) (?:was not an allowed global|whose module)'
)
_REFUSED_CALLS = (
    r'call reduce for unrecognized function (.+?)(?: which belongs.*)?$',
    r'create new object .* but got (.+)$',
    r'(getattr\(.*\)) is not allowed',
)
_DOTTED_NAME = re.compile(r'^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$')
_STRING_OPCODES = {'SHORT_BINUNICODE', 'BINUNICODE', 'BINUNICODE8'}
_STRING_OPCODES |= {'UNICODE', 'SHORT_BINSTRING', 'BINSTRING', 'STRING'}


def _refused_global(message, filename):
    """The global or call that torch refused to unpickle, or None when the
    file is simply not a readable pickle."""
    match = _REFUSED_GLOBAL.search(message)
    if match:
        name = match.group(1)
        # torch names builtins without their module ('eval').
        name = name if '.' in name else f'builtins.{name}'
        return name if _DOTTED_NAME.match(name) else None  # else garbage
    for line in message.splitlines():
        for pattern in _REFUSED_CALLS:
            match = re.search(pattern, line)
            if match:
                return match.group(1).strip()
    if 'Unsupported operand' not in message:
        return None
    # torch stopped at an opcode it does not handle: a protocol it cannot
    # read, garbage, or an importing opcode. Name what the pickle imports.
    allowed = set(_weights_only_unpickler._get_allowed_globals())
    allowed |= set(_weights_only_unpickler._get_user_allowed_globals())
    imported = [g for g in _pickled_globals(filename) if g not in allowed]
    return ', '.join(dict.fromkeys(imported)) or None


def _pickled_globals(filename, limit=1 << 26):
    """The globals (``module.name``) that the file's pickles import, read
    without unpickling: opcodes are only listed (:mod:`pickletools`)."""
    try:
        if zipfile.is_zipfile(filename):
            with zipfile.ZipFile(filename) as archive:
                name = next(
                    n for n in archive.namelist() if n.endswith('data.pkl')
                )
                data = archive.read(name)
        else:
            with open(filename, 'rb') as file:
                data = file.read(limit)
    except (OSError, StopIteration, zipfile.BadZipFile):
        return []
    stream, found, strings = io.BytesIO(data), [], []
    try:
        while stream.tell() < len(data):  # a legacy file holds several
            for opcode, arg, _ in pickletools.genops(stream):
                if opcode.name in ('GLOBAL', 'INST'):
                    found.append(arg.replace(' ', '.'))
                elif opcode.name == 'STACK_GLOBAL' and len(strings) >= 2:
                    found.append('.'.join(strings[-2:]))
                elif opcode.name in _STRING_OPCODES:
                    strings.append(str(arg))
    except Exception:  # noqa: BLE001 - garbage ends the listing
        pass
    return [name for name in found if _DOTTED_NAME.match(name)]


def _unreadable_reason(message):
    operand = re.search(r'Unsupported operand (\d+)', message)
    if operand:
        code = int(operand.group(1))
        opcode = pickletools.code2op.get(chr(code))
        name = f', opcode {opcode.name}' if opcode else ''
        return (
            "it is not a pickle torch's safe loader reads (it stopped at "
            f'byte {code:#04x}{name})'
        )
    needs_import = re.search(r'\S+ must be imported to load \w+', message)
    if needs_import:
        return needs_import.group(0)
    return 'its pickle is malformed'


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
