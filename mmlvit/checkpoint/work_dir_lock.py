"""One live training run per work directory.

Two ``tools/train.py`` runs with the same ``--work-dir`` both write
``epoch_N.pth``, ``best_*.pth`` and ``last_checkpoint`` there and overwrite
each other's checkpoints without a word. :func:`acquire_work_dir` creates
``WORK_DIR/train.lock`` (exclusively: ``O_CREAT | O_EXCL``) naming the
process id, the host, the process start time and the command; a second run
stops with :class:`WorkDirBusyError` naming the other run. A lock left by a
run that was killed (its process id is gone on this host, or now belongs to
a process started later) is taken over with a warning. A lock held on
another host cannot be checked from here: the message says to delete the
file once that run is gone. The lock is removed when the process exits
(normally, on an error or when stopped by a signal with a checkpoint).
"""

import atexit
import json
import os
import os.path as osp
import socket
import sys
import time

LOCK_NAME = 'train.lock'


class WorkDirBusyError(RuntimeError):
    """Another live training run holds the work directory."""


def _start_time(pid):
    """The start time of process ``pid`` in clock ticks since boot (Linux
    ``/proc``), or None where it cannot be read."""
    try:
        with open(f'/proc/{pid}/stat') as file:
            stat = file.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: count after its ')'.
    return stat.rsplit(')', 1)[1].split()[19]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _record():
    pid = os.getpid()
    return dict(
        pid=pid,
        host=socket.gethostname(),
        start_time=_start_time(pid),
        started=time.strftime('%Y-%m-%d %H:%M:%S'),
        command=' '.join([osp.basename(sys.executable)] + sys.argv),
    )


def _read(path):
    try:
        with open(path) as file:
            record = json.load(file)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _stale_reason(record):
    """Why the run of ``record`` is over (a phrase), or None while it may
    still be running."""
    if record.get('host') != socket.gethostname():
        return None
    pid = record.get('pid')
    if not isinstance(pid, int):
        return 'it names no process id'
    if not _alive(pid):
        return f'process {pid} no longer exists'
    started = record.get('start_time')
    if started is not None and _start_time(pid) not in (None, started):
        return f'process id {pid} now belongs to another process'
    return None


def _describe(record):
    return (
        f'pid {record.get("pid")} on host {record.get("host")} (started '
        f'{record.get("started")}: {record.get("command")})'
    )


def acquire_work_dir(work_dir):
    """Make this process the work directory's one live training run.

    Returns:
        str | None: a warning to log when a stale lock was taken over.

    Raises:
        WorkDirBusyError: another live run holds ``work_dir``.
    """
    os.makedirs(work_dir, exist_ok=True)
    path = osp.join(work_dir, LOCK_NAME)
    mine = _record()
    warning = None
    for _ in range(50):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            other = _read(path)
            if other is None:
                # Being written by a run starting right now, or garbage.
                if time.time() - _mtime(path) < 5:
                    time.sleep(0.1)
                    continue
                other, reason = {}, 'it is not a lock this code wrote'
            elif other.get('pid') == mine['pid'] and (
                other.get('host') == mine['host']
            ):
                reason = 'it is this process'
            else:
                reason = _stale_reason(other)
            if reason is None:
                raise WorkDirBusyError(
                    f'{work_dir} is in use by another training run: '
                    f'{_describe(other)}. Two runs in one work directory '
                    "overwrite each other's checkpoints. Wait for that run "
                    'to end or stop it, or pass another --work-dir. If that '
                    f'run is gone (e.g. its host went down), delete {path}.'
                ) from None
            if reason != 'it is this process':
                warning = (
                    f'Took over {path} from a run that ended without '
                    f'releasing it ({reason}; it was {_describe(other)}): '
                    'that run was killed. Its newest complete checkpoint '
                    'is what --resume continues from.'
                )
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, 'w') as file:
            json.dump(mine, file)
            file.flush()
            os.fsync(file.fileno())
        atexit.register(release_work_dir, path, mine)
        return warning
    raise WorkDirBusyError(f'Could not create {path}: it keeps reappearing.')


def _mtime(path):
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def release_work_dir(path, mine):
    """Remove the lock ``path`` if it is still this process's."""
    record = _read(path)
    if (
        record
        and record.get('pid') == mine['pid']
        and (record.get('host') == mine['host'])
    ):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def is_rank_zero(launcher):
    """Whether this process is rank 0 of the job (read from the launcher's
    environment, before the process group exists)."""
    variable = {
        'pytorch': 'RANK',
        'slurm': 'SLURM_PROCID',
        'mpi': 'OMPI_COMM_WORLD_RANK',
    }.get(launcher)
    return variable is None or os.environ.get(variable, '0') == '0'
