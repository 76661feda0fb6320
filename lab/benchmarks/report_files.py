"""The GPU report's files: the environment table, each part's table (a
benchmark's own, the flagship's measures or a test summary), report.md,
report.json, plots and a bundle of every part's folder."""

import json
import os
import os.path as osp
import platform
import re
import shutil
import statistics
import subprocess
import tarfile

from .flagship_run import plot_iterations

TOOL_PLOTS = {
    'attention': 'attention_benchmark.png',
    'model': 'benchmark_model.png',
}


def environment(repo_root):
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
            cwd=repo_root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return env


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


# A test's outcome in a verbose pytest log: after its id, or (pytest-xdist)
# after the worker and the progress, before its id.
OUTCOME = 'PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS'
_OUTCOME = re.compile(
    rf'::\S+ ({OUTCOME})\b|^\[gw\d+\] \[\s*\d+%\] ({OUTCOME}) \S+::'
)


def test_summary(text):
    """Outcome counts of a verbose pytest log (complete or cut off, from
    one process or pytest-xdist's) and its FAILED / ERROR lines."""
    counts = {}
    for line in text:
        match = _OUTCOME.search(line)
        if match:
            outcome = match.group(1) or match.group(2)
            counts[outcome] = counts.get(outcome, 0) + 1
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


def plot_parts(parts, path):
    from lab.benchmarks import plots

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
