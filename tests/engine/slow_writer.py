"""Test-only plugin: checkpoint files are written slowly (about half a second
each, in small flushed pieces), so that a test can kill training while a
file is being written. Imported through ``custom_imports``."""

import time

from mmlvit.checkpoint import atomic_files

PIECES = 10


def write_in_pieces(file, data):
    step = max(1, len(data) // PIECES)
    for start in range(0, len(data), step):
        file.write(data[start : start + step])
        file.flush()
        time.sleep(0.05)


atomic_files.write_all = write_in_pieces
