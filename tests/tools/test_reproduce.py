"""The small-scale reproduction pipeline (teacher -> init -> distill -> eval)
on a few hundred images: every artefact is produced and well-formed."""

import csv
import subprocess

import pytest


@pytest.fixture(scope='module')
def grid_run(tmp_path_factory, repo_root, python, fashion_mnist_root):
    out = tmp_path_factory.mktemp('reproduce')
    cmd = [
        python,
        'tools/analysis/reproduce.py',
        '--operators',
        'gla',
        '--settings',
        'random',
        'mlpcopy',
        'attncopy+distill',
        'softmax',
        '--distill',
        'both',
        '--epochs',
        '1',
        '--train-indices',
        '128',
        '--test-indices',
        '128',
        '--teacher',
        str(out / 'teacher.pth'),
        '--out',
        str(out / 'grid.csv'),
        '--work-root',
        str(out / 'work'),
        '--threads',
        '1',
    ]
    first = subprocess.run(
        [*cmd, '--jobs', '2'],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    again = subprocess.run(
        cmd, cwd=repo_root, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr[-3000:]
    return out, first.stdout, again.stdout


def test_teacher_is_trained_and_kept(grid_run):
    from mmlvit.checkpoint import load_checkpoint_file

    out, log, _ = grid_run
    teacher = load_checkpoint_file(out / 'teacher.pth')
    assert 'backbone.layers.0.attn.qkv.weight' in teacher['state_dict']
    assert 0 <= teacher['meta']['fashion_mnist_test_top1'] <= 100
    assert 'Teacher:' in log


def test_rows_and_plot(grid_run):
    out, log, _ = grid_run
    with open(out / 'grid.csv', newline='') as f:
        rows = list(csv.DictReader(f))
    runs = {(r['operator'], r['setting'], r['distill']) for r in rows}
    assert runs == {
        ('gla', 'random', '0'),
        ('gla', 'random', '1'),
        ('gla', 'mlpcopy', '0'),
        ('gla', 'mlpcopy', '1'),
        ('gla', 'attncopy', '1'),
        ('softmax', 'softmax', '0'),
    }
    assert len(rows) == len(runs)
    for row in rows:
        assert 0 <= float(row['top1']) <= 100
        assert float(row['wall_s']) > 0
        assert row['dataset'] == 'fashion-mnist-5k'
        assert row['lambda'] == ('50.0' if row['distill'] == '1' else '0')
    assert (out / 'grid.png').stat().st_size > 10_000
    assert 'grid ETA' in log
    assert '2 at a time, 1 threads each' in log
    # The MLPCopy runs copied the teacher's MLPs (the copy table is logged).
    assert 'mlp' in log and 'copied' in log


def test_second_run_resumes_without_rerunning(grid_run):
    out, _, again = grid_run
    assert '6 runs already in' in again
    assert '0 to run' in again
    with open(out / 'grid.csv', newline='') as f:
        assert len(list(csv.DictReader(f))) == 6


def test_sweep_plot(tmp_path, repo_root):
    """Rows that vary epochs get the top-1-against-epochs plot."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        'reproduce', f'{repo_root}/tools/analysis/reproduce.py'
    )
    reproduce = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reproduce)
    rows = [
        dict(
            dataset='fashion-mnist-5k',
            operator='relu',
            setting='mlpcopy',
            distill=str(distill),
            **{'lambda': '50.0' if distill else '0'},
            epochs=str(epochs),
            seed=str(seed),
            top1=str(70 + epochs / 10 + seed + distill),
            wall_s='1.0',
            device='cpu',
        )
        for distill in (0, 1)
        for epochs in (10, 40)
        for seed in (0, 1)
    ]
    table = reproduce.summarise(rows)
    assert len(table) == 4
    first = table[0]  # mlpcopy, no distillation, 10 epochs
    assert first[3:6] == (0, 0.0, 10)
    assert first[6] == pytest.approx(71.5)  # mean of 71 and 72
    assert first[8] == 2
    reproduce.plot_results(rows, tmp_path / 'schedule.png')
    assert (tmp_path / 'schedule.png').stat().st_size > 10_000


def test_report_prints_markdown(grid_run, repo_root, python):
    out, _, _ = grid_run
    report = subprocess.run(
        [
            python,
            'tools/analysis/reproduce.py',
            '--report',
            '--out',
            str(out / 'grid.csv'),
        ],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    lines = [ln for ln in report.stdout.splitlines() if ln.startswith('|')]
    # A settings matrix: header, rule, GLA w/o and w/ distillation, softmax.
    assert lines[0] == (
        '| dataset | operator | distill | Random | Copy | MLPCopy |'
    )
    assert len(lines) == 5
    without, with_distill, softmax = (
        [cell.strip() for cell in ln.strip('|').split('|')] for ln in lines[2:]
    )
    assert without[1:3] == ['gla', 'w/o'] and without[4] == '-'
    assert with_distill[1:3] == ['gla', 'w/']
    assert all(c.endswith('(1)') for c in with_distill[3:6])
    assert softmax[1].startswith('softmax') and softmax[3].endswith('(1)')
    assert softmax[4:] == ['', ''] and len(without) == 6
