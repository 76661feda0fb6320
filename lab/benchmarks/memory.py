"""Peak memory of one call: on CUDA from the caching allocator's
statistics, on the CPU from the resident set of a child process."""

import json
import os
import subprocess
import sys

import torch

from .resident_memory import peak_resident_growth_mib


def cuda_peak_growth_mib(step):
    """``torch.cuda.max_memory_allocated`` during one call of ``step``
    (after ``reset_peak_memory_stats``) minus the memory allocated before
    the call, MiB: what the call adds on top of what already lives
    (weights, inputs)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def peak_growth_mib(step, device='cpu'):
    """Peak memory growth of one call of ``step`` after one warm-up call:
    :func:`cuda_peak_growth_mib` on CUDA, the resident-set growth on the
    CPU (see :mod:`.resident_memory`)."""
    if device == 'cuda':
        step()
        return cuda_peak_growth_mib(step)
    return peak_resident_growth_mib(step)


def run_memory_worker(script, argv):
    """Run ``python script *argv`` with glibc's mmap threshold at 64 KiB (so
    that freed tensors leave the resident set) and return the JSON value of
    the last line it prints."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_='65536')
    out = subprocess.run(
        [sys.executable, os.path.abspath(script), *argv],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def memory_table(make_step, names, keys):
    """{name: {key: MiB}}: the resident-set growth of one call of
    ``make_step(name, key)`` after a warm-up call, each step built and
    dropped in turn (run in a worker, see :func:`worker_memory_table`)."""
    table = {}
    for name in names:
        table[name] = {}
        for key in keys:
            step = make_step(name, key)
            table[name][key] = peak_resident_growth_mib(step)
            del step
    return table


def worker_memory_table(script, argv):
    """The :func:`memory_table` a worker (``python script *argv``, see
    :func:`run_memory_worker`) prints as JSON, integer keys restored."""
    table = run_memory_worker(script, argv)
    return {
        name: {int(key): mib for key, mib in per_key.items()}
        for name, per_key in table.items()
    }
