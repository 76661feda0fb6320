"""Whether Triton kernels can run here: Triton imports (it ships with CUDA
builds of PyTorch), and whether its interpreter runs them on CPU tensors
(``TRITON_INTERPRET=1``, read when triton is imported; the tests' way)."""

import functools
import os


@functools.cache
def triton_importable() -> bool:
    """Whether Triton imports."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def interpreting() -> bool:
    """Whether Triton's interpreter runs the kernels (on CPU tensors)."""
    return os.environ.get('TRITON_INTERPRET') == '1'
