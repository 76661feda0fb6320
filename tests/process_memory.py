"""Give a test process's freed models back to the system.

mmpretrain's ViT and this project's backbones register bound methods as
state-dict hooks, so every built model sits in a reference cycle: it is
freed only when Python's cyclic collector runs, which counts objects,
not bytes. A test that builds ViT-B-sized models one after another would
otherwise keep them all (about 2 GB per DeiT-T/S/B set), and two test
workers would outgrow a 24 GB machine."""

import ctypes
import gc
import os

# A full collection costs 0.1-0.5 s once torch and the OpenMMLab packages
# are imported: collect only when the process has grown by this much
# since the last collection left it.
GROWTH_BYTES = 1 << 30

try:
    _malloc_trim = ctypes.CDLL('libc.so.6').malloc_trim
except (OSError, AttributeError):  # not glibc
    _malloc_trim = None

_resident_after_last_release = 0


def resident_bytes():
    """This process's resident set size, or 0 where /proc is absent."""
    try:
        with open('/proc/self/statm') as f:
            return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
    except OSError:
        return 0


def release_memory(growth=GROWTH_BYTES):
    """Collect cycles and return freed heap pages to the system when the
    process has grown by ``growth`` bytes since the last release."""
    global _resident_after_last_release
    if resident_bytes() < _resident_after_last_release + growth:
        return
    gc.collect()
    if _malloc_trim is not None:
        _malloc_trim(0)
    _resident_after_last_release = resident_bytes()
