"""Peak resident memory of a process on Linux, for the benchmarks.

Read from ``/proc/self/status``: ``VmRSS`` is the resident set now,
``VmHWM`` its high-water mark, which writing ``5`` to
``/proc/self/clear_refs`` resets to the current resident set. Run the
measured process with ``MALLOC_MMAP_THRESHOLD_=65536`` so that every
tensor above 64 KiB is its own mapping, returned to the system when freed:
the resident set then follows the live tensors.
"""


def resident_kib(field='VmRSS'):
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``), KiB."""
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise RuntimeError(f'{field} not in /proc/self/status')


def reset_peak_resident():
    """Reset ``VmHWM`` to the current resident set and return it (KiB):
    the baseline of a growth, read from ``VmHWM`` itself, which never falls
    below it afterwards (``VmRSS`` is counted apart and can read a page
    above it)."""
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')
    return resident_kib('VmHWM')


def peak_resident_growth_mib(step):
    """Resident-set growth (MiB) during one call of ``step``, after one
    warm-up call; at least 0: Linux counts resident pages per thread and
    adds them to the process's counts in batches, so a call that grows
    nothing can read a few pages below the baseline (20 KiB seen)."""
    step()
    before = reset_peak_resident()
    step()
    return max(0.0, (resident_kib('VmHWM') - before) / 1024)
