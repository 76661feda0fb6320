"""Running a report's parts: each a command in its own process group under
a time limit, its output logged and kept with time stamps; a refresher
thread that rewrites a report while a part runs."""

import os
import signal
import subprocess
import threading
import time


def child_env(repo_root):
    """This process's environment, with ``repo_root`` first on
    PYTHONPATH, unbuffered output and Triton's autotuning cached."""
    env = dict(os.environ)
    paths = [repo_root] + [
        p for p in env.get('PYTHONPATH', '').split(':') if p
    ]
    env['PYTHONPATH'] = ':'.join(paths)
    env['PYTHONUNBUFFERED'] = '1'
    env.setdefault('TRITON_CACHE_AUTOTUNING', '1')
    return env


def run_part(command, timeout_s, log_path, env=None, cwd=None):
    """Run ``command`` (in ``cwd``) in its own process group with its
    output (stdout and stderr) going to ``log_path``; kill the group at
    ``timeout_s``. ``env`` defaults to this process's environment.

    Returns:
        dict: ``returncode``, ``timed_out``, ``wall_s`` and ``lines``, the
        output as (seconds since the start, line) pairs.
    """
    lines = []
    start = time.monotonic()
    with open(log_path, 'w') as log:
        log.write('$ ' + ' '.join(command) + '\n')
        log.flush()
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors='replace',
            start_new_session=True,
        )

        def read():
            for line in proc.stdout:
                lines.append((time.monotonic() - start, line.rstrip('\n')))
                log.write(line)
                log.flush()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            stop_group(proc)
        except BaseException as e:  # a stop signal: the part goes too
            stop_group(proc)
            reader.join(timeout=10)
            log.write(f'\n[part] stopped from outside: {e!r}\n')
            raise
        reader.join(timeout=10)
        wall_s = time.monotonic() - start
        if timed_out:
            log.write(f'\n[part] stopped after {timeout_s:.0f} s\n')
    return dict(
        returncode=proc.returncode,
        timed_out=timed_out,
        wall_s=wall_s,
        lines=lines,
    )


def stop_group(proc):
    """SIGTERM, then SIGKILL, to the process group of ``proc``."""
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def log_tail(path, count=25):
    """The last ``count`` lines of a log file (none if it is missing)."""
    try:
        with open(path, errors='replace') as f:
            return f.read().splitlines()[-count:]
    except OSError:
        return []


def refresh_every(period, write):
    """Call ``write()`` every ``period`` seconds in a thread until the
    returned event is set (join the returned thread after setting it)."""
    stop = threading.Event()

    def loop():
        while not stop.wait(period):
            try:
                write()
            except Exception as e:  # the next refresh writes it again
                print(f'[report] refresh failed: {e!r}', flush=True)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return stop, thread
