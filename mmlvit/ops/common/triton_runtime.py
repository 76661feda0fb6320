"""Whether Triton kernels can run here: Triton imports (it ships with CUDA
builds of PyTorch), whether its interpreter runs them on CPU tensors
(``TRITON_INTERPRET=1``, read when triton is imported; the tests' way),
whether a GPU gives the fused kernels the shared memory they need, which
GPU it is, and whether a launch's loops copy tiles ahead."""

import functools
import os
from collections.abc import Callable

import torch

# Shared memory one program may need, for heads of up to 64 channels:
# every fused kernel fits an A100's 163 KiB (sm_80; an H100 has 227) in
# fp32, bf16 and fp16, and the 99 KiB of sm_86 / sm_89 in bf16 only
# (tools/analysis/kernel_resources.py --arch 80 / 89).
FULL_SHARED_MEMORY = 163 * 1024
BF16_SHARED_MEMORY = 99 * 1024
# Programs of a launch from which its loops over token tiles copy nothing
# ahead (num_stages=1): copying ahead hides a program's load latency
# behind its own work, which pays where a multiprocessor has one program
# or two; with a few per multiprocessor the others run while one waits
# (README.md).
MANY_PROGRAMS = 512


def _memoized(fn: Callable) -> Callable:
    """``fn`` computed once per arguments, as ``functools.cache`` does,
    but in a plain dict that TorchDynamo traces without its warning about
    cache wrappers (these facts are read while a model compiles)."""
    values = {}

    @functools.wraps(fn)
    def memoized(*args):
        if args not in values:
            values[args] = fn(*args)
        return values[args]

    return memoized


@_memoized
def triton_importable() -> bool:
    """Whether Triton imports."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def fused_entry(fn: Callable) -> Callable:
    """``fn``, an entry point of fused kernels, taking tensors:

    - on the device of its first tensor argument: Triton launches a kernel
      on the current CUDA device, not on its tensors', so a model on
      ``cuda:1`` in a process whose current device is 0 would launch there
      (the backward needs nothing: autograd runs it with the device of its
      tensors current);
    - as in eager mode where ``torch.compile`` traces a model: TorchDynamo
      breaks its graph around the call instead of tracing into Triton's
      launch code (which it cannot do under Triton's interpreter, and which
      holds nothing for its graph), and autograd records the kernels'
      Functions as in eager mode. The compiled graphs hold everything else
      (with ``fullgraph=True`` Dynamo refuses the break: compile with
      ``backend='torch'`` for one graph).
    """

    @functools.wraps(fn)
    def on_tensors_device(*args, **kwargs):
        tensor = next(a for a in args if isinstance(a, torch.Tensor))
        if tensor.device.type != 'cuda':
            return fn(*args, **kwargs)
        with torch.cuda.device(tensor.device):
            return fn(*args, **kwargs)

    return torch.compiler.disable(on_tensors_device)


def num_stages(programs: int) -> int:
    """Triton's ``num_stages`` for a launch of ``programs`` programs whose
    loops stream token tiles: 1 from :data:`MANY_PROGRAMS` on, else
    Triton's default, 3."""
    return 1 if programs >= MANY_PROGRAMS else 3


def interpreting() -> bool:
    """Whether Triton's interpreter runs the kernels (on CPU tensors)."""
    return os.environ.get('TRITON_INTERPRET') == '1'


@_memoized
def _shared_memory_per_program(device: torch.device) -> int:
    return torch.cuda.get_device_properties(
        device
    ).shared_memory_per_block_optin


@_memoized
def _capability(device: torch.device) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def compute_capability(device: torch.device) -> tuple[int, int] | None:
    """(major, minor) of a CUDA ``device``; None for others (the
    interpreter's CPU tensors)."""
    return _capability(device) if device.type == 'cuda' else None


def platform_reason(device: torch.device) -> str | None:
    """Why the fused kernels may not run on ``device``, or None: they are
    written for NVIDIA GPUs (PTX instructions, NVIDIA launch options such
    as register caps), and a ROCm (HIP) build of PyTorch calls AMD GPUs
    ``cuda`` devices too."""
    if device.type == 'cuda' and torch.version.hip is not None:
        return (
            'NVIDIA GPUs (the kernels use NVIDIA PTX instructions and launch '
            f'options); this PyTorch drives {device} through ROCm'
        )
    return None


def shared_memory_reason(*tensors: torch.Tensor) -> str | None:
    """Why the fused kernels may not launch on the CUDA device of
    ``tensors`` for their dtypes, or None: bf16 tokens need a GPU whose
    programs may have :data:`BF16_SHARED_MEMORY` bytes of shared memory,
    fp16 and fp32 ones :data:`FULL_SHARED_MEMORY`."""
    device = tensors[0].device
    if device.type != 'cuda':
        return None
    bf16 = all(t.dtype == torch.bfloat16 for t in tensors)
    have = _shared_memory_per_program(device)
    if have >= (BF16_SHARED_MEMORY if bf16 else FULL_SHARED_MEMORY):
        return None
    if have >= BF16_SHARED_MEMORY:
        return (
            f'bf16 tokens only on {device}, whose programs may have '
            f'{have // 1024} KiB of shared memory (fp16 / fp32 tokens need '
            f'up to {FULL_SHARED_MEMORY // 1024} KiB)'
        )
    return (
        'GPUs whose programs may have at least '
        f'{BF16_SHARED_MEMORY // 1024} KiB of shared memory ({device}: '
        f'{have // 1024} KiB)'
    )
