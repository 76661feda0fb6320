"""Timing a call on the CPU (wall clock) or on CUDA (CUDA events)."""

import statistics
import time

import torch

from .memory import cuda_peak_growth_mib
from .resident_memory import reset_peak_resident, resident_kib


class Deadline:
    """A time budget: ``expired()`` once ``seconds`` have passed since
    construction (never for ``seconds=None``)."""

    def __init__(self, seconds=None):
        self.seconds = seconds
        self.end = None if seconds is None else time.monotonic() + seconds

    def expired(self):
        return self.end is not None and time.monotonic() > self.end


def synchronize(device):
    if device == 'cuda':
        torch.cuda.synchronize()


def first_call_seconds(fn, device='cpu'):
    """Wall time of one call, the device synchronised before and after (on
    CUDA the first call of a shape holds compilation and autotuning)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def time_call(fn, device='cpu'):
    """(wall s, CPU s) of one call. On CUDA the wall time is the time
    between two CUDA events around the call, and the process CPU time is
    that of queueing the work."""
    cpu = time.process_time()
    if device != 'cuda':
        wall = time.perf_counter()
        fn()
        return time.perf_counter() - wall, time.process_time() - cpu
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3, time.process_time() - cpu


def interleaved_times(fns, repeats, device='cpu'):
    """Time each callable after one first call each, in ``repeats`` rounds
    where every callable runs once in turn (a burst of load from elsewhere
    on the machine hits all of them alike).

    Returns:
        dict: key -> ``first_s`` (the first call), ``wall`` and ``cpu``
        (lists of seconds of the timed calls), ``median_s`` (of ``wall``).
    """
    out = {key: dict(first_s=first_call_seconds(fn, device)) for key, fn in
           fns.items()}  # fmt: skip
    for value in out.values():
        value.update(wall=[], cpu=[])
    for _ in range(repeats):
        for key, fn in fns.items():
            wall, cpu = time_call(fn, device)
            out[key]['wall'].append(wall)
            out[key]['cpu'].append(cpu)
    for value in out.values():
        value['median_s'] = statistics.median(value['wall'])
    return out


def measure_step(step, repeats, budget_s, device='cpu'):
    """Time ``step`` and record the peak memory it adds.

    One first call (the warm-up), then up to ``repeats`` timed calls while
    their total stays under ``budget_s``.

    - CPU: a warm-up longer than the budget is itself the measurement (then
      there is one timed call, the warm-up). Peak memory is the rise of the
      peak resident set (VmHWM, reset first) above the resident set before
      the warm-up (Linux; see :mod:`.resident_memory`).
    - CUDA: at least one timed call after the warm-up, timed by CUDA
      events; peak memory is ``torch.cuda.max_memory_allocated`` over one
      more call, after ``reset_peak_memory_stats``, minus the memory
      allocated before that call (:func:`.memory.cuda_peak_growth_mib`).

    Returns:
        dict: ``times`` (s, the timed calls), ``warm_up_s`` and
        ``peak_mib``.
    """
    if device == 'cuda':
        warm_up = first_call_seconds(step, device)
        times = []
        while len(times) < max(repeats, 1) and (
            not times or sum(times) < budget_s
        ):
            times.append(time_call(step, device)[0])
        peak_mib = cuda_peak_growth_mib(step)
        return dict(times=times, warm_up_s=warm_up, peak_mib=peak_mib)
    before = reset_peak_resident()
    warm_up = first_call_seconds(step)
    times = []
    if warm_up > budget_s:
        times.append(warm_up)
    while len(times) < repeats and sum(times) < budget_s:
        times.append(time_call(step)[0])
    peak_mib = (resident_kib('VmHWM') - before) / 1024
    return dict(times=times, warm_up_s=warm_up, peak_mib=peak_mib)


def steady_seconds(times, device):
    """The time a case is reported at: the best of the timed calls on the
    CPU (load from other jobs only slows a call down), their median on
    CUDA."""
    return statistics.median(times) if device == 'cuda' else min(times)
