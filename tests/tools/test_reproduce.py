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
        cmd, cwd=repo_root, capture_output=True, text=True, timeout=1200
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
        ('softmax', 'softmax', '0'),
    }
    for row in rows:
        assert 0 <= float(row['top1']) <= 100
        assert float(row['wall_s']) > 0
        assert row['dataset'] == 'fashion-mnist-5k'
        assert row['lambda'] == ('50.0' if row['distill'] == '1' else '0')
    assert (out / 'grid.png').stat().st_size > 10_000
    assert 'grid ETA' in log
    # The MLPCopy runs copied the teacher's MLPs (the copy table is logged).
    assert 'mlp' in log and 'copied' in log


def test_second_run_resumes_without_rerunning(grid_run):
    out, _, again = grid_run
    assert '5 runs already in' in again
    assert '0 to run' in again
    with open(out / 'grid.csv', newline='') as f:
        assert len(list(csv.DictReader(f))) == 5
