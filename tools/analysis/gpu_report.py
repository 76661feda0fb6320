"""One report of everything that needs a CUDA GPU, within 8 minutes.

On a machine with one CUDA GPU (H100 / H200), from the repository root, each
part in its own process (``sys.executable``, the environment passed
through, PYTHONPATH with the repository root first, so no install is
needed) under its own time limit, timed:

=========  =====  =====================================================
part       limit  what
=========  =====  =====================================================
tests      130 s  ``pytest -m cuda tests/ops tests/models`` (most of it
                  compiling the Triton kernels, cached on disk for the
                  parts after it), without fla's own GLA backend (its
                  autotuning alone takes minutes per dtype); in up to
                  ``TEST_WORKERS`` processes with pytest-xdist (they
                  compile in parallel), in one without it
attention   60 s  benchmark_attention.py, bf16, N = 197 ... 65537
model      110 s  benchmark_model.py, ViT-B/16 at 224 / 512 / 1024 /
                  2048 px, batch 128 / 32 / 8 / 2, bf16, forward and
                  forward + backward: mmpretrain's and timm's softmax
                  ViT-B and every linear operator
profile     40 s  profile_step.py, one ViT-B/16 train step at 224 px,
                  batch 128, bf16, of the softmax ViT and every linear
                  one: the longest kernels and their share of the step
distill     30 s  benchmark_distill.py, DeiT-S, batch 64, bf16
flagship    90 s  tools/train.py --amp (bf16) on
                  configs/lvit/vit-b_gla_copy-distill_in1k.py with a
                  generated ImageNet-shaped folder of random JPEGs and
                  a random softmax teacher checkpoint, 2 short epochs,
                  with an empty Triton cache of its own (a cold start)
variants   240 s  only with ``--parts``: launch_variants.py, the fused
                  kernels' shipped launch options against the other
                  choice of each, at 224 / 1024 / 2048 px
=========  =====  =====================================================

460 s in all (without variants), and a few seconds of set-up and writing:
within 8 minutes. The benchmarks get ``--max-seconds`` (their limit less
30 s for start-up and writing), start no case after it and list the rest
as skipped; a part still running at its limit is killed (its process
group) and reported as timed out, with what it saved.
``TRITON_CACHE_AUTOTUNING=1`` keeps Triton's autotuning results on disk,
so a kernel tuned in one part (fla's GLA: about 2.5 minutes the first
time) is not tuned again in the next. A part that fails does not stop the
others.

Writes to OUT_DIR: ``report.md`` (GPU, versions, the time of each part, one
table per part), ``report.json``, ``report_bundle.tar.gz`` (the report, the
logs of every part and the benchmarks' own files; no checkpoints, data or
Triton caches) and plots (``attention.png``, ``model.png``, ``parts.png``,
``flagship.png``): at most 8 files, none in a subfolder. Each part works in
``--work-dir``/PART (its log in ``log.txt`` there), a folder that outlives
the report. The report is rewritten before every part (that part listed as
``running``), every 30 s (``REFRESH_S``) while it runs (its elapsed time
and the tail of its log; the bundle with its partial log) and after it, so
a report killed from outside keeps the parts done and all but the last
30 s of the running part. On SIGTERM, SIGINT
or SIGHUP the running part is stopped (its process group), listed as
stopped from outside and the report written once more before exiting.

Example::

    python tools/analysis/gpu_report.py work_dirs/gpu_report
"""

import argparse
import importlib.util
import os
import os.path as osp
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, REPO_ROOT)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab.benchmarks.flagship_run import run_flagship  # noqa: E402
from lab.benchmarks.options import cuda_unavailable_reason  # noqa: E402
from lab.benchmarks.parts import (  # noqa: E402
    child_env,
    log_tail,
    refresh_every,
    run_part,
)
from lab.benchmarks.report_files import (  # noqa: E402
    environment,
    part_state,
    part_table,
    write_report,
)

BUDGETS = dict(
    tests=130, attention=60, model=110, profile=40, distill=30, flagship=90
)
# Only when asked for (--parts variants), after or instead of the report.
OPTIONAL_BUDGETS = dict(variants=240)
STARTUP_S = 30  # a benchmark's start-up and writing, inside its limit
TEST_WORKERS = 8  # pytest-xdist processes of the tests part (at most)
REFRESH_S = 30  # the report's refresh period while a part runs
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
REPORT_LOCK = threading.Lock()  # the refresher's writes and the others'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('out_dir', help='where the report goes')
    parser.add_argument(
        '--parts',
        nargs='+',
        choices=list(BUDGETS) + list(OPTIONAL_BUDGETS),
        default=list(BUDGETS),
        help='the parts to run (default: all but variants, in this order)',
    )
    parser.add_argument(
        '--scale',
        type=float,
        default=1.0,
        help='multiply every time limit (e.g. 2 on a slower GPU)',
    )
    parser.add_argument(
        '--work-dir',
        default=osp.join(REPO_ROOT, 'work_dirs', 'gpu_report_parts'),
        help="the parts' folders (logs, the benchmarks' files, the "
        "flagship's data); kept after the report (default: %(default)s)",
    )
    return parser.parse_args(argv)


class Stopped(BaseException):
    """Raised in the main thread by a stop signal (see ``STOP_SIGNALS``)."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


def raise_stopped(signum, frame):
    raise Stopped(signum)


def tool(name):
    return [sys.executable, osp.join('tools', 'analysis', name)]


def part_command(part, work, budget):
    """The command of a part, and the file holding its table (or None)."""
    tool_budget = str(max(budget - STARTUP_S, 10))
    cuda = [
        '--device',
        'cuda',
        '--dtype',
        'bf16',
        '--max-seconds',
        tool_budget,
    ]
    if part == 'tests':
        command = [sys.executable, '-m', 'pytest', '-m', 'cuda', 'tests/ops']
        command += ['tests/models', '--ignore', 'tests/ops/test_gla_fla.py']
        command += ['-v', '-rfE', '-p', 'no:cacheprovider']
        return command + xdist_options(), None
    if part == 'attention':
        tokens = ['197', '785', '3137', '12545', '16385', '65537']
        command = tool('benchmark_attention.py') + cuda + ['--tokens', *tokens]
        command += ['--gla-tokens', '0', '--repeats', '5', '--out-dir', work]
        return command, osp.join(work, 'attention_benchmark.md')
    if part == 'model':
        command = tool('benchmark_model.py') + cuda
        command += ['--resolutions', '224', '512', '1024', '2048']
        command += ['--batch-sizes', '128', '32', '8', '2', '--repeats', '3']
        command += ['--budget-s', '3', '--out-dir', work]
        return command, osp.join(work, 'table.md')
    if part == 'profile':
        command = tool('profile_step.py') + cuda + ['--resolution', '224']
        command += ['--batch-size', '128', '--out-dir', work]
        return command, osp.join(work, 'profile.md')
    if part == 'distill':
        command = tool('benchmark_distill.py') + cuda[:4]
        return command + ['--batch-size', '64', '--repeats', '5'], None
    if part == 'variants':
        command = tool('launch_variants.py') + cuda + ['--repeats', '3']
        return command + ['--out-dir', work], osp.join(work, 'variants.md')
    raise ValueError(part)


def xdist_options():
    """pytest-xdist's options for the tests part: a process per CPU core,
    up to ``TEST_WORKERS``; none without xdist or with one core."""
    workers = min(TEST_WORKERS, os.cpu_count() or 1)
    if workers < 2 or importlib.util.find_spec('xdist') is None:
        return []
    return ['-n', str(workers)]


def unfinished(work, budget, started, state='running'):
    """The result of a part that has not ended: ``state``, its time so
    far and the tail of its log (``work/log.txt``)."""
    tail = log_tail(osp.join(work, 'log.txt'))
    head = tail[:1] if tail[:1] and tail[0].startswith('$ ') else []
    return dict(
        state=state,
        budget_s=budget,
        wall_s=time.monotonic() - started,
        command=head[0][2:].split(' ') if head else [],
        table=[f'The last lines of its log ({state}):', '', '```']
        + tail
        + ['```'],
    )


def run(part, work, budget):
    """One part, never raising: its result dict."""
    os.makedirs(work, exist_ok=True)
    start = time.monotonic()
    try:
        if part == 'flagship':
            result = run_flagship(work, budget, REPO_ROOT)
            table_path = None
        else:
            command, table_path = part_command(part, work, budget)
            log = osp.join(work, 'log.txt')
            result = run_part(
                command, budget, log, child_env(REPO_ROOT), REPO_ROOT
            )
            result['command'] = command
        result['table'] = part_table(part, result, table_path)
    except Exception as e:  # the report goes on with the next part
        result = dict(error=f'{type(e).__name__}: {e}', lines=[], table=[])
        result['wall_s'] = time.monotonic() - start
    result['budget_s'] = budget
    return result


def run_parts(args, env, parts, current):
    """Run the parts one after another into ``parts``, the report written
    before each, every ``REFRESH_S`` seconds during it and after it.
    ``current`` holds the running part's :func:`unfinished` arguments
    (empty between parts)."""
    for part in args.parts:
        work = osp.join(args.work_dir, part)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        budget = {**BUDGETS, **OPTIONAL_BUDGETS}[part] * args.scale
        current.update(work=work, budget=budget, started=time.monotonic())

        def write_running(part=part):
            with REPORT_LOCK:
                if current:  # not ended (or stopped) meanwhile
                    parts[part] = unfinished(**current)
                    write_report(args.out_dir, env, parts, args.work_dir)

        print(f'[gpu_report] {part} ...', flush=True)
        write_running()
        stop, refresher = refresh_every(REFRESH_S, write_running)
        try:
            result = run(part, work, budget)
        finally:
            stop.set()
            refresher.join()
        with REPORT_LOCK:
            parts[part] = result
            current.clear()
        print(
            f'[gpu_report] {part}: {part_state(result)}, '
            f'{result["wall_s"]:.0f} s',
            flush=True,
        )
        write_report(args.out_dir, env, parts, args.work_dir)


def main(argv=None):
    args = parse_args(argv)
    reason = cuda_unavailable_reason()
    if reason:
        print(f'gpu_report needs a CUDA GPU: {reason}', file=sys.stderr)
        return 2
    env = environment(REPO_ROOT)
    parts, current = {}, {}
    handlers = {sig: signal.signal(sig, raise_stopped) for sig in STOP_SIGNALS}
    try:
        run_parts(args, env, parts, current)
    except Stopped as e:
        for sig in STOP_SIGNALS:  # let the last report be written
            signal.signal(sig, signal.SIG_IGN)
        state = f'stopped from outside ({e.name})'
        with REPORT_LOCK:
            if current:
                part = osp.basename(current['work'])
                parts[part] = unfinished(**current, state=state)
                current.clear()
            write_report(args.out_dir, env, parts, args.work_dir)
        print(f'[gpu_report] {state}', flush=True)
        return 128 + e.signum
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        data = osp.join(args.work_dir, 'flagship', 'data')
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
