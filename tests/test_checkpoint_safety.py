"""Checkpoints load safely (weights_only + allow-list) with clear errors."""

import os
import pickle
import subprocess
import traceback

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


SYSTEM = f'{os.system.__module__}.system'  # posix.system on Linux


def _shown_to_user(err):
    """The error as a traceback prints it, chained exceptions included."""
    return ''.join(traceback.format_exception(err))


def test_code_executing_pickle_is_refused(tmp_path):
    marker = tmp_path / 'pwned'
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {}, 'payload': _RunsCode(marker)}, path)
    with pytest.raises(UnsafeCheckpointError, match='evil.pth'):
        load_checkpoint_file(path)
    # mmengine's own loader (load_from, --resume, init_cfg) is routed too.
    with pytest.raises(UnsafeCheckpointError) as err:
        CheckpointLoader.load_checkpoint(str(path))
    assert str(err.value) == (
        f'Refused to load {path}: its pickle calls {SYSTEM}, which is '
        'neither a tensor nor an allow-listed type, and unpickling it could '
        'execute code. Nothing from the file was run. Do not load this '
        'file; if it comes from a source you trust, get its weights as '
        '.safetensors or as a plain dict of tensors instead.'
    )
    # torch's advice to turn the check off reaches the user nowhere.
    assert 'weights_only' not in _shown_to_user(err.value)
    assert not marker.exists()


@pytest.mark.parametrize(
    'payload',
    [
        # Protocol 0: the INST opcode imports and calls in one step.
        b"(S'touch MARKER'\nios\nsystem\n.",
        # Protocol 4 (STACK_GLOBAL, framing), as pickle.dumps writes it.
        'protocol-4',
    ],
)
def test_pickles_torch_cannot_parse_still_name_the_call(tmp_path, payload):
    marker = tmp_path / 'pwned'
    if payload == 'protocol-4':
        payload = pickle.dumps(_RunsCode(marker), protocol=4)
        name = SYSTEM
    else:
        payload = payload.replace(b'MARKER', str(marker).encode())
        name = 'os.system'
    path = tmp_path / 'evil.pkl'
    path.write_bytes(payload)
    with pytest.raises(UnsafeCheckpointError) as err:
        load_checkpoint_file(path)
    assert f'its pickle calls {name}, which' in str(err.value)
    assert 'weights_only' not in _shown_to_user(err.value)
    assert not marker.exists()


def test_random_bytes_are_a_corrupt_file_not_an_unsafe_one(tmp_path):
    generator = torch.Generator().manual_seed(0)
    path = tmp_path / 'noise.pth'
    for size in [1, 2, 7, 64, 4096] * 40:
        noise = torch.randint(0, 256, (size,), generator=generator)
        path.write_bytes(bytes(noise.to(torch.uint8).tolist()))
        with pytest.raises(CheckpointError) as err:
            load_checkpoint_file(path)
        assert type(err.value) is CheckpointError, str(err.value)
        assert str(err.value).startswith(f'Cannot read checkpoint {path}: ')
        assert 'weights_only' not in _shown_to_user(err.value)


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
    with pytest.raises(CheckpointError) as err:
        load_checkpoint_file(path)
    assert str(err.value) == (
        f"Cannot read checkpoint {path}: it is not a pickle torch's safe "
        'loader reads (it stopped at byte 0x6e). The file is corrupt, of '
        'another format or pickled with a protocol torch.load does not '
        'support: re-download it, or re-save it with torch.save (default '
        'protocol) or as .safetensors.'
    )
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
