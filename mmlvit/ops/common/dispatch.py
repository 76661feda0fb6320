"""Which path a linear attention call takes: the fused Triton kernels or
the PyTorch reference."""

import torch
from torch import Tensor

from .tracing import exporting
from .triton_runtime import (
    interpreting,
    platform_reason,
    shared_memory_reason,
    triton_importable,
)

BACKENDS = ('auto', 'torch', 'triton')
FUSED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# Widest head the kernels take (ViTs use 64): every kernel then launches
# on sm_80 and sm_90 in fp32, bf16 and fp16. Wider heads take a 128-wide
# tile, and some kernels (the query gradients' in fp32 on sm_90, TTT's in
# every dtype) would need more shared memory than one program may have
# (tools/analysis/kernel_resources.py --head-width 128).
MAX_HEAD_DIMS = 64


def check_backend(backend: str) -> None:
    """Raise a ValueError unless ``backend`` is one of :data:`BACKENDS`."""
    if backend not in BACKENDS:
        raise ValueError(
            f'Unknown linear-attention backend {backend!r}; expected one of '
            f'{BACKENDS}.'
        )


def use_fused(
    backend: str, *tensors: Tensor, needs_shared_memory: bool = True
) -> bool:
    """Whether a call on ``tensors`` runs the fused kernels.

    ``'torch'``: never. ``'auto'``: on CUDA tensors of a dtype the kernels
    take (fp32/bf16/fp16) and heads of at most :data:`MAX_HEAD_DIMS` when
    Triton imports and the GPU has the shared memory the kernels need for
    that dtype. ``'triton'``: always, and a
    RuntimeError names what is missing when it cannot (CPU tensors outside
    Triton's interpreter, fp64, wider heads, no Triton, a GPU short of
    shared memory for the dtype). Neither while a model is traced for
    export (the reference is plain, traceable PyTorch, the same function)
    nor for an empty first tensor (an empty batch: no kernel to launch;
    the PyTorch path gives the empty result). ``needs_shared_memory=False``
    leaves out the shared-memory check, for kernels that need a few KB (the
    depthwise convolutions).
    """
    check_backend(backend)
    if backend == 'torch' or exporting():
        return False
    if 0 in tensors[0].shape:  # an empty batch: nothing to launch
        return False
    device = tensors[0].device
    dtype_ok = all(t.dtype in FUSED_DTYPES for t in tensors)
    width_ok = all(t.shape[-1] <= MAX_HEAD_DIMS for t in tensors)
    device_ok = device.type == 'cuda' or interpreting()
    if backend == 'auto':
        if not (device.type == 'cuda' and dtype_ok and width_ok):
            return False
        if not triton_importable() or platform_reason(device) is not None:
            return False
        return (
            not needs_shared_memory or shared_memory_reason(*tensors) is None
        )
    if not triton_importable():
        raise RuntimeError(
            "backend='triton' needs the triton package (it comes with CUDA "
            "builds of PyTorch); use backend='torch' or 'auto'."
        )
    if not device_ok:
        raise RuntimeError(
            "backend='triton' runs Triton kernels, which need CUDA tensors "
            f'(or TRITON_INTERPRET=1 for the interpreter); got {device}. Use '
            "backend='torch' or 'auto'."
        )
    reason = platform_reason(device)
    if reason is not None:
        raise RuntimeError(
            f"backend='triton' runs on {reason}. Use backend='torch' or "
            "'auto' (which takes the PyTorch path there)."
        )
    if not dtype_ok:
        raise RuntimeError(
            "backend='triton' takes fp32, bf16 or fp16 tensors, got "
            f"{[t.dtype for t in tensors]}; use backend='torch' (which "
            'also computes fp64).'
        )
    if not width_ok:
        raise RuntimeError(
            f"backend='triton' takes heads of at most {MAX_HEAD_DIMS} "
            f'channels, got {[t.shape[-1] for t in tensors]}; use '
            "backend='torch' (or 'auto', which falls back to it)."
        )
    reason = shared_memory_reason(*tensors) if needs_shared_memory else None
    if reason is not None:
        raise RuntimeError(
            f"backend='triton' takes {reason}; use bf16 autocast where "
            "that fits, or backend='torch' (or 'auto', which falls back to "
            'it).'
        )
    return True
