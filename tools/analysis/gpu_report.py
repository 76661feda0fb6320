"""One report of everything that needs a CUDA GPU, within 8 minutes.

On a machine with one CUDA GPU (H100 / H200), from the repository root, each
part in its own process (``sys.executable``, the environment passed
through, PYTHONPATH with the repository root first, so no install is
needed) under its own time limit, timed:

=========  =====  =====================================================
part       limit  what
=========  =====  =====================================================
tests      170 s  ``pytest -m cuda tests/ops tests/models`` (most of it
                  compiling the Triton kernels, cached on disk for the
                  parts after it), without fla's own GLA backend (its
                  autotuning alone takes minutes per dtype)
attention   60 s  benchmark_attention.py, bf16, N = 197 ... 65537
model      110 s  benchmark_model.py, ViT-B/16 at 224 / 512 / 1024 /
                  2048 px, batch 128 / 32 / 8 / 2, bf16, forward and
                  forward + backward: mmpretrain's and timm's softmax
                  ViT-B and every linear operator
distill     30 s  benchmark_distill.py, DeiT-S, batch 64, bf16
flagship    90 s  tools/train.py --amp (bf16) on
                  configs/lvit/vit-b_gla_copy-distill_in1k.py with a
                  generated ImageNet-shaped folder of random JPEGs and
                  a random softmax teacher checkpoint, 2 short epochs,
                  with an empty Triton cache of its own (a cold start)
=========  =====  =====================================================

460 s in all, and a few seconds of set-up and writing: within 8 minutes.
The benchmarks get ``--max-seconds`` (their limit less 30 s for start-up and
writing), start no case after it and list the rest as skipped; a part
still running at its limit is killed (its process group) and reported as
timed out, with what it saved. ``TRITON_CACHE_AUTOTUNING=1`` keeps Triton's
autotuning results on disk, so a kernel tuned in one part (fla's GLA: about
2.5 minutes the first time) is not tuned again in the next. A part that
fails does not stop the others.

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
import json
import os
import os.path as osp
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import threading
import time

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
FLAGSHIP = 'configs/lvit/vit-b_gla_copy-distill_in1k.py'
BUDGETS = dict(tests=170, attention=60, model=110, distill=30, flagship=90)
STARTUP_S = 30  # a benchmark's start-up and writing, inside its limit
REFRESH_S = 30  # the report's refresh period while a part runs
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
REPORT_LOCK = threading.Lock()  # the refresher's writes and the others'
TOOL_PLOTS = {
    'attention': 'attention_benchmark.png',
    'model': 'benchmark_model.png',
}
ITERATION = re.compile(
    r'Epoch\(train\)\s*\[\d+\]\[\s*\d+/\d+\].*?\btime: ([\d.]+)'
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('out_dir', help='where the report goes')
    parser.add_argument(
        '--parts',
        nargs='+',
        choices=list(BUDGETS),
        default=list(BUDGETS),
        help='the parts to run (default: all, in this order)',
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


def environment():
    """GPU, versions and the commit, as {name: text}."""
    import torch

    env = {
        'python': platform.python_version(),
        'torch': torch.__version__,
        'CUDA (torch built for)': str(torch.version.cuda),
    }
    if torch.cuda.is_available():
        env['GPU'] = torch.cuda.get_device_name()
        memory = torch.cuda.get_device_properties(0).total_memory
        env['GPU memory (GiB)'] = f'{memory / 2**30:.0f}'
    for package in ('triton', 'fla', 'timm', 'mmengine', 'mmpretrain'):
        try:
            module = __import__(package)
            env[package] = getattr(module, '__version__', 'unknown')
        except Exception as e:  # an absent or broken package is reported
            env[package] = f'not importable ({type(e).__name__})'
    try:
        env['commit'] = subprocess.run(
            ['git', 'rev-parse', '--short', 'HEAD'],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return env


def child_env():
    """This process's environment, with the repository root first on
    PYTHONPATH, unbuffered output and Triton's autotuning cached."""
    env = dict(os.environ)
    paths = [REPO_ROOT] + [
        p for p in env.get('PYTHONPATH', '').split(':') if p
    ]
    env['PYTHONPATH'] = ':'.join(paths)
    env['PYTHONUNBUFFERED'] = '1'
    env.setdefault('TRITON_CACHE_AUTOTUNING', '1')
    return env


def run_part(command, timeout_s, log_path, env=None):
    """Run ``command`` from the repository root in its own process group
    with its output (stdout and stderr) going to ``log_path``; kill the
    group at ``timeout_s``.

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
            cwd=REPO_ROOT,
            env=env or child_env(),
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
            log.write(f'\n[gpu_report] stopped from outside: {e!r}\n')
            raise
        reader.join(timeout=10)
        wall_s = time.monotonic() - start
        if timed_out:
            log.write(f'\n[gpu_report] stopped after {timeout_s:.0f} s\n')
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


def make_imagenet_folder(root, num_train=320, num_val=64, size=(160, 128)):
    """Random JPEGs in ``root/{train,val}`` with ``root/meta/{train,val}.txt``
    ("name.JPEG label" lines): the flat layout of mmpretrain's ImageNet."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    os.makedirs(osp.join(root, 'meta'), exist_ok=True)
    for split, count in (('train', num_train), ('val', num_val)):
        os.makedirs(osp.join(root, split), exist_ok=True)
        entries = []
        for i in range(count):
            name = f'{split}_{i:05d}.JPEG'
            pixels = rng.integers(0, 256, (size[1], size[0], 3), np.uint8)
            Image.fromarray(pixels).save(osp.join(root, split, name), 'JPEG')
            entries.append(f'{name} {i % 1000}\n')
        with open(osp.join(root, 'meta', f'{split}.txt'), 'w') as f:
            f.writelines(entries)
    return root


def save_teacher(cfg, path):
    """Build the config's softmax teacher (random weights) and save its
    state dict as an mmpretrain checkpoint at ``path``."""
    import torch
    from mmpretrain.registry import MODELS

    import mmlvit  # noqa: F401

    torch.manual_seed(0)
    teacher = MODELS.build(cfg.model.teacher)
    torch.save(dict(state_dict=teacher.state_dict(), meta={}), path)
    return path


def flagship_options(data_root, teacher, epochs=2, batch_size=64):
    """``--cfg-options`` of the short flagship run."""
    options = dict(
        model__teacher_checkpoint=teacher,
        train_dataloader__batch_size=batch_size,
        train_dataloader__num_workers=4,
        train_cfg__max_epochs=epochs,
        train_cfg__val_interval=1000,
        optim_wrapper__dtype='bfloat16',
        default_hooks__logger__interval=1,
        default_hooks__checkpoint__interval=1000,
        default_hooks__checkpoint__save_last=False,
        log_processor__window_size=1,
    )
    for loader in ('train', 'val', 'test'):
        options[f'{loader}_dataloader__dataset__data_root'] = data_root
    return [f'{k.replace("__", ".")}={v}' for k, v in options.items()]


def iteration_times(lines):
    """(seconds from the start to the first training-iteration log line,
    [iteration times logged by mmengine, s]) from ``run_part``'s lines."""
    first, times = None, []
    for at, line in lines:
        match = ITERATION.search(line)
        if match:
            first = at if first is None else first
            times.append(float(match.group(1)))
    return first, times


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
        return command, None
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
    if part == 'distill':
        command = tool('benchmark_distill.py') + cuda[:4]
        return command + ['--batch-size', '64', '--repeats', '5'], None
    raise ValueError(part)


def flagship_command(work, data_root, teacher):
    command = [
        sys.executable,
        osp.join('tools', 'train.py'),
        FLAGSHIP,
        '--amp',
    ]
    command += ['--work-dir', osp.join(work, 'work_dir'), '--cfg-options']
    return command + flagship_options(data_root, teacher)


def run_flagship(work, budget):
    """Prepare the data and the teacher, then train (all in the budget)."""
    from mmengine.config import Config

    start = time.monotonic()
    data_root = make_imagenet_folder(osp.join(work, 'data', 'imagenet'))
    teacher = save_teacher(
        Config.fromfile(osp.join(REPO_ROOT, FLAGSHIP)),
        osp.join(work, 'data', 'teacher.pth'),
    )
    prepared = time.monotonic() - start
    command = flagship_command(work, data_root, teacher)
    # A Triton cache of its own: the first iteration is timed cold, as on
    # a fresh machine, although earlier parts compiled the same kernels.
    env = child_env()
    env['TRITON_CACHE_DIR'] = osp.join(work, 'triton_cache')
    log = osp.join(work, 'log.txt')
    result = run_part(command, budget - prepared, log, env=env)
    result['command'] = command
    first, times = iteration_times(result['lines'])
    result['flagship'] = dict(
        prepare_s=prepared,
        first_iteration_line_s=first,
        iteration_times_s=times,
    )
    result['wall_s'] += prepared
    return result


def part_table(part, result, table_path):
    """Markdown lines of a part's result."""
    lines = result['lines']
    if part == 'flagship' and 'flagship' in result:
        f = result['flagship']
        times = f['iteration_times_s']
        first = f['first_iteration_line_s']
        rows = [
            ('data + teacher checkpoint (s)', f'{f["prepare_s"]:.1f}'),
            (
                'process start to the first iteration log line (s)',
                'none' if first is None else f'{first:.1f}',
            ),
            ('iterations logged', str(len(times))),
            ('first iteration (s)', f'{times[0]:.3f}' if times else '-'),
            (
                'median of the later iterations (s)',
                f'{statistics.median(times[1:]):.3f}'
                if len(times) > 1
                else '-',
            ),
        ]
        return ['| measure | value |', '|---|---:|'] + [
            f'| {a} | {b} |' for a, b in rows
        ]
    if table_path and osp.exists(table_path):
        with open(table_path) as f:
            return f.read().rstrip('\n').split('\n')
    text = [line for _, line in lines]
    if part == 'distill':
        starts = [i for i, t in enumerate(text) if t.startswith('DeiT-S')]
        if starts:
            return text[starts[-1] :]
    if part == 'tests':
        return test_summary(text)
    return (
        ['No table; the last lines of the log:', '', '```']
        + text[-25:]
        + ['```']
    )


def test_summary(text):
    """Outcome counts of a verbose pytest log (complete or cut off) and
    its FAILED / ERROR lines."""
    counts = {}
    for line in text:
        match = re.search(r'::\S+ (PASSED|FAILED|SKIPPED|ERROR|XFAIL)', line)
        if match:
            counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    lines = ['| outcome | tests |', '|---|---:|']
    lines += [f'| {k} | {v} |' for k, v in sorted(counts.items())]
    summary = [t for t in text if re.search(r'=+ .*\d+ \w+.* in [\d.]+s', t)]
    lines += ['', *summary[-1:]]
    lines += [t for t in text if re.match(r'(FAILED|ERROR) ', t)]
    return lines


def part_state(result):
    if result.get('state'):  # 'running', 'stopped from outside (SIG...)'
        return result['state']
    if result.get('timed_out'):
        return 'timed out'
    if result.get('error'):
        return 'error'
    return (
        'ok'
        if result.get('returncode') == 0
        else f'exit {result.get("returncode")}'
    )


def write_report(out_dir, env, parts, work):
    """report.md, report.json, plots and report_bundle.tar.gz in
    ``out_dir`` from the parts run so far ({part: result})."""
    os.makedirs(out_dir, exist_ok=True)
    md = ['# GPU report', '', '| | |', '|---|---|']
    md += [f'| {k} | {v} |' for k, v in env.items()]
    md += [
        '',
        '| part | limit (s) | wall (s) | state |',
        '|---|---:|---:|---|',
    ]
    for part, r in parts.items():
        cells = [part, f'{r["budget_s"]:.0f}', f'{r["wall_s"]:.1f}']
        md.append('| ' + ' | '.join([*cells, part_state(r)]) + ' |')
    total = sum(r['wall_s'] for r in parts.values())
    md += ['', f'Total wall time of the parts: {total:.0f} s.']
    for part, r in parts.items():
        md += ['', f'## {part}', '', f'`{" ".join(r.get("command", []))}`', '']
        md += [
            f'Wall time {r["wall_s"]:.1f} s of {r["budget_s"]:.0f} s; '
            f'{part_state(r)}.',
            '',
        ]
        if r.get('error'):
            md += ['```', r['error'].rstrip(), '```', '']
        md += r.get('table', [])
    write_text(osp.join(out_dir, 'report.md'), '\n'.join(md) + '\n')
    saved = {
        p: {k: v for k, v in r.items() if k != 'lines'}
        for p, r in parts.items()
    }
    saved = dict(environment=env, parts=saved)
    write_text(osp.join(out_dir, 'report.json'), json.dumps(saved, indent=1))
    for part, name in TOOL_PLOTS.items():
        source = osp.join(work, part, name)
        if part in parts and osp.exists(source):
            shutil.copyfile(source, osp.join(out_dir, f'{part}.png'))
    plot_parts(parts, osp.join(out_dir, 'parts.png'))
    times = (
        parts.get('flagship', {}).get('flagship', {}).get('iteration_times_s')
    )
    if times:
        plot_iterations(times, osp.join(out_dir, 'flagship.png'))
    bundle(out_dir, work, parts)


def write_text(path, text):
    """Write ``text`` to ``path`` through a temporary file, so that a
    reader (or a kill) never meets half a file."""
    with open(path + '.tmp', 'w') as f:
        f.write(text)
    os.replace(path + '.tmp', path)


def log_tail(path, count=25):
    """The last ``count`` lines of a log file (none if it is missing)."""
    try:
        with open(path, errors='replace') as f:
            return f.read().splitlines()[-count:]
    except OSError:
        return []


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


def refresh_every(period, write):
    """Call ``write()`` every ``period`` seconds in a thread until the
    returned event is set (join the returned thread after setting it)."""
    stop = threading.Event()

    def loop():
        while not stop.wait(period):
            try:
                write()
            except Exception as e:  # the next refresh writes it again
                print(f'[gpu_report] refresh failed: {e!r}', flush=True)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return stop, thread


def plot_parts(parts, path):
    from mmlvit.benchmark import plots

    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = list(parts)
    ax.barh(
        names,
        [parts[n]['budget_s'] for n in names],
        color='0.85',
        label='limit',
    )
    ax.barh(
        names,
        [parts[n]['wall_s'] for n in names],
        height=0.5,
        label='wall time',
    )
    ax.set_xlabel('seconds')
    ax.invert_yaxis()
    ax.legend(fontsize=8)
    ax.set_title('GPU report: time of each part')
    plots.save(fig, path)


def plot_iterations(times, path):
    from mmlvit.benchmark import plots

    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(times) + 1), times, marker='o')
    ax.set_yscale('log')
    ax.set_xlabel('iteration')
    ax.set_ylabel('time (s)')
    ax.set_title('Flagship training run: time of each iteration')
    ax.grid(True, which='both', alpha=0.3)
    plots.save(fig, path)


def bundle(out_dir, work, parts):
    """report_bundle.tar.gz: the report files and the folders of the
    ``parts`` (no data, checkpoints, Triton caches, files being written or
    the bundle itself)."""

    def keep(info):
        skip = ('/data', '.pth', '.safetensors', 'report_bundle')
        skip += ('triton_cache',)
        if info.name.endswith('.tmp') or any(s in info.name for s in skip):
            return None
        return info

    path = osp.join(out_dir, 'report_bundle.tar.gz')
    with tarfile.open(path + '.tmp', 'w:gz') as tar:
        for name in sorted(os.listdir(out_dir)):
            if not name.startswith('report_bundle'):
                tar.add(osp.join(out_dir, name), arcname=name, filter=keep)
        for part in parts:
            if osp.isdir(osp.join(work, part)):
                tar.add(osp.join(work, part), f'parts/{part}', filter=keep)
    os.replace(path + '.tmp', path)


def run(part, work, budget):
    """One part, never raising: its result dict."""
    os.makedirs(work, exist_ok=True)
    start = time.monotonic()
    try:
        if part == 'flagship':
            result, table_path = run_flagship(work, budget), None
        else:
            command, table_path = part_command(part, work, budget)
            result = run_part(command, budget, osp.join(work, 'log.txt'))
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
        budget = BUDGETS[part] * args.scale
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
    sys.path.insert(0, REPO_ROOT)
    from mmlvit.benchmark.options import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if reason:
        print(f'gpu_report needs a CUDA GPU: {reason}', file=sys.stderr)
        return 2
    env = environment()
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
