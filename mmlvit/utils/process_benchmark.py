"""Time and peak memory of a step, measured in a fresh forked process.

The benchmarks (``tools/analysis/benchmark_*.py``) run every case in its
own child process so that each starts from the same memory, and time a
step as the best of a few runs after a warm-up. Linux with glibc only
(/proc, mallopt).
"""

import ctypes
import multiprocessing
import time
import traceback

from .resident_memory import reset_peak_resident, resident_kib

M_MMAP_THRESHOLD = -3  # glibc mallopt parameter


def measure_step(step, repeats, budget_s):
    """Time ``step`` and record the peak memory it adds.

    One warm-up call, then up to ``repeats`` timed calls while their total
    stays under ``budget_s``; a warm-up longer than the budget is itself
    the measurement (then there is one timed call, the warm-up). Peak
    memory is the rise of the peak resident set (VmHWM, reset first) above
    the resident set before the warm-up.

    Returns:
        dict: ``times`` (s, the timed calls), ``warm_up_s`` and
        ``peak_mib``.
    """
    reset_peak_resident()
    before = resident_kib('VmRSS')
    start = time.perf_counter()
    step()
    warm_up = time.perf_counter() - start
    times = []
    if warm_up > budget_s:
        times.append(warm_up)
    while len(times) < repeats and sum(times) < budget_s:
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    peak_mib = (resident_kib('VmHWM') - before) / 1024
    return dict(times=times, warm_up_s=warm_up, peak_mib=peak_mib)


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
