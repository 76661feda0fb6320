"""The operators' precision: autocast off, sums in at least fp32.

Every operator here sums over tokens (key-value summaries, normalisers,
scan states and decays), which half precision cannot hold. So each runs
with autocast off, its floating-point inputs cast to one accumulation dtype
(fp32 for fp16/bf16/fp32 inputs, the widest input dtype when wider: fp64
stays fp64), and casts its result back to the dtype of one input
(docs/operators.md).

- :func:`fp32_accumulation` decorates an operator taking tensors.
- :func:`fp32_scope` is the same as a context manager, for code that is not
  one function of its tensors (e.g. a module reading its own weights).
- :func:`autocast_input` casts a module's input once to the autocast dtype.
"""

import contextlib
import functools
import inspect

import torch


def accumulation_dtype(*dtypes):
    """The dtype to accumulate ``dtypes`` in: the widest of them and fp32.

    Args:
        *dtypes (torch.dtype): Floating-point dtypes.

    Returns:
        torch.dtype: fp32 for fp16/bf16/fp32, fp64 if one of them is fp64.
    """
    return functools.reduce(torch.promote_types, dtypes, torch.float32)


@contextlib.contextmanager
def fp32_scope(*tensors):
    """Autocast off on the tensors' device; yields the tensors cast to
    their :func:`accumulation_dtype` (``None`` entries stay ``None``).

    Example::

        with fp32_scope(x, linear.weight) as (x, weight):
            y = F.linear(x, weight)  # in fp32 under any autocast
        y = y.to(dtype)

    Args:
        *tensors (Tensor | None): Floating-point tensors on one device.

    Yields:
        list[Tensor | None]: ``tensors``, each in the common dtype (the
        tensor itself where it already has it).
    """
    present = [t for t in tensors if t is not None]
    dtype = accumulation_dtype(*(t.dtype for t in present))
    with torch.autocast(present[0].device.type, enabled=False):
        yield [None if t is None else t.to(dtype) for t in tensors]


def autocast_input(x):
    """``x`` cast to the autocast dtype of its device while autocast runs
    there (fp64 and non-float tensors as they are), else ``x``.

    Autocast casts an fp32 input once for every op that reads it, and each
    op keeps its own copy for backward: a module that feeds one tensor to
    several projections casts it once with this instead, and they all read
    (and keep) that one copy.

    Args:
        x (Tensor): Any tensor.

    Returns:
        Tensor: ``x`` or its cast.
    """
    device = x.device.type
    eligible = x.is_floating_point() and x.dtype != torch.float64
    if not eligible or not torch.is_autocast_enabled(device):
        return x
    return x.to(torch.get_autocast_dtype(device))


def _is_floating_tensor(value):
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def fp32_accumulation(result_dtype_of=None):
    """Decorator: the function runs in :func:`fp32_scope` of its
    floating-point tensor arguments, which it receives cast to their
    accumulation dtype; its result (a tensor) is cast back to the dtype the
    argument named ``result_dtype_of`` had, or left in the accumulation
    dtype when ``result_dtype_of`` is None.

    Example::

        @fp32_accumulation(result_dtype_of='v')
        def attention(q, k, v, eps=1e-6):
            ...  # q, k, v in fp32 (fp64 if one was fp64), autocast off

    Args:
        result_dtype_of (str, optional): Name of a tensor argument.

    Returns:
        Callable: The decorator.
    """

    def decorate(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            arguments = bound.arguments
            if result_dtype_of is not None:
                result_dtype = arguments[result_dtype_of].dtype
            names = [n for n, a in arguments.items() if _is_floating_tensor(a)]
            with fp32_scope(*(arguments[n] for n in names)) as upcast:
                arguments.update(zip(names, upcast))
                result = fn(*bound.args, **bound.kwargs)
            if result_dtype_of is None:
                return result
            return result.to(result_dtype)

        return wrapper

    return decorate
