"""Where a step's time goes: its kernels (CUDA) or operators (CPU), by the
time each spends running, from one call under ``torch.profiler``."""

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from .timing import synchronize


def self_times(step, device='cpu'):
    """Profile one call of ``step``.

    On CUDA the entries are the GPU kernels (their time on the device), on
    the CPU the operators (their own time, not their children's).

    Returns:
        list[dict]: ``name``, ``calls`` and ``ms`` (in all) of every entry
        that took time, the longest first.
    """
    cuda = device == 'cuda'
    activities = [ProfilerActivity.CPU]
    activities += [ProfilerActivity.CUDA] * cuda
    synchronize(device)
    with profile(activities=activities) as prof:
        step()
        synchronize(device)
    kind = DeviceType.CUDA if cuda else DeviceType.CPU
    rows = []
    for event in prof.key_averages():
        if event.device_type != kind:
            continue
        us = (
            event.self_device_time_total if cuda else event.self_cpu_time_total
        )
        if us > 0:
            rows.append(dict(name=event.key, calls=event.count, ms=us / 1e3))
    return sorted(rows, key=lambda row: -row['ms'])


def top_rows(entries, top):
    """The ``top`` longest entries and one for the rest, each with its
    ``share`` of the total (the sum of every entry's time)."""
    total = sum(entry['ms'] for entry in entries) or 1.0
    rows = [dict(entry, share=entry['ms'] / total) for entry in entries[:top]]
    rest = entries[top:]
    if rest:
        ms = sum(entry['ms'] for entry in rest)
        name = f'({len(rest)} others)'
        calls = sum(entry['calls'] for entry in rest)
        rows.append(dict(name=name, calls=calls, ms=ms, share=ms / total))
    return rows


def short_name(name, width=70):
    """A kernel name cut to ``width`` characters (C++ templates are long)."""
    name = name.replace('|', '/')
    return name if len(name) <= width else name[: width - 3] + '...'
