"""Running one benchmark case: in a fresh forked process on the CPU, in
this process on CUDA, errors and out-of-memory caught either way."""

import ctypes
import gc
import multiprocessing
import traceback

import torch

M_MMAP_THRESHOLD = -3  # glibc mallopt parameter


def _child(conn, measure, case):
    # Tensors over 64 KiB get their own mappings, returned to the system when
    # freed: the resident set follows the live tensors, not malloc's caches.
    ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 64 * 1024)
    try:
        conn.send(measure(*case))
    except Exception:  # reported by the parent
        conn.send(dict(error=traceback.format_exc(limit=3)))
    conn.close()


def run_in_child(measure, *case, timeout_s=None):
    """Call ``measure(*case)`` in a forked process and return its result.

    Every case starts from the same memory. Linux with glibc only.

    Args:
        measure (callable): Returns a picklable result (a dict).
        *case: Its arguments (not pickled: the child is a fork).
        timeout_s (float, optional): Stop the child after this long.

    Returns:
        The result; ``dict(error=...)`` if ``measure`` raised or the
        process died, ``dict(skipped=...)`` if it ran past ``timeout_s``.
    """
    ctx = multiprocessing.get_context('fork')
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(sender, measure, case))
    proc.start()
    sender.close()
    result = None
    if receiver.poll(timeout_s):
        try:
            result = receiver.recv()
        except EOFError:
            pass
    else:
        proc.kill()
        result = dict(skipped=f'stopped after {timeout_s:g} s')
    proc.join()
    if result is None:
        result = dict(error=f'process died (exit code {proc.exitcode})')
    return result


def run_in_process(measure, *case):
    """Call ``measure(*case)`` here (CUDA cannot be used in a forked child
    once initialised). Returns its result, ``dict(error='out of memory')``
    (with the allocator's message in ``detail``) or ``dict(error=traceback)``;
    afterwards the CUDA cache is emptied so that the next case starts from
    the same free memory."""
    try:
        return measure(*case)
    except torch.cuda.OutOfMemoryError as e:
        return dict(error='out of memory', detail=str(e).split('\n')[0])
    except Exception:
        return dict(error=traceback.format_exc(limit=3))
    finally:
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()


def run_case(measure, *case, device='cpu', timeout_s=None):
    """:func:`run_in_child` on the CPU, :func:`run_in_process` on CUDA
    (``timeout_s`` applies to the CPU only)."""
    if device == 'cuda':
        return run_in_process(measure, *case)
    return run_in_child(measure, *case, timeout_s=timeout_s)
