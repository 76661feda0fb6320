"""The dense reproduction tool (tools/analysis/reproduce_dense.py,
docs/dense_reproduction.md): a tiny real grid writes its CSV rows, tables
and plot; a second call resumes without rerunning; the run configs, the
summary and the plot on synthetic results."""

import csv
import os
import os.path as osp

import pytest
from tool_runs import run_ok

from lab.reproduction import records as engine_records
from lab.reproduction.dense import cli, configs, records, report, runner
from lab.reproduction.dense.plots import draw_dense

TINY = [
    '--tasks',
    'seg',
    '--settings',
    'random',
    'mlpcopy+distill',
    '--seeds',
    '0',
    '--epochs',
    '1',
    '--canvas',
    '64',
    '--train-images',
    '16',  # 2 iterations of batch 8
    '--test-images',
    '4',
    '--jobs',
    '1',
    '--threads',
    '1',
]


@pytest.fixture(scope='module')
def tiny_grid(tmp_path_factory, repo_root, python, fashion_mnist_root):
    """Two real UperNet runs (Random, MLPCopy + distill) of 2 iterations on
    16 generated 64 px canvases, evaluated on 4."""
    out = tmp_path_factory.mktemp('dense')
    paths = [
        '--data-root',
        str(out / 'data'),
        '--out',
        str(out / 'grid.csv'),
        '--work-root',
        str(out / 'work'),
    ]
    env = dict(os.environ, OMP_NUM_THREADS='1')
    done = run_ok(
        [python, 'tools/analysis/reproduce_dense.py', *TINY, *paths],
        repo_root,
        env,
        timeout=300,
    )
    return out, paths, done.stdout


def _rows(path):
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


def test_tiny_grid_writes_rows_tables_and_plot(tiny_grid):
    out, _, log = tiny_grid
    rows = _rows(out / 'grid.csv')
    assert [(r['task'], r['setting'], r['seed']) for r in rows] == [
        ('seg', 'random', '0'),
        ('seg', 'mlpcopy+distill', '0'),
    ]
    for row in rows:
        assert (row['canvas'], row['train_images'], row['epochs']) == (
            '64',
            '16',
            '1',
        )
        assert row['iters'] == '2'
        assert 0 <= float(row['mIoU']) <= 100
        assert row['bbox_mAP'] == row['segm_mAP'] == ''
        assert float(row['train_min']) > 0 and float(row['eval_min']) > 0
    # The data was generated with the tool's options.
    assert '16 canvases of 64x64 px' in log
    assert 'grid ETA' in log
    # The MLPCopy run copied the teacher's MLPs (the copy table is logged).
    logs = ''.join(
        open(osp.join(folder, name)).read()
        for folder, _, names in os.walk(out / 'work')
        for name in names
        if name.endswith('.log') and 'mlpcopy' in folder
    )
    assert 'mlp' in logs and 'copied' in logs
    table = (out / 'grid.md').read_text()
    assert table.startswith('| metric | Random | MLPCopy + distill |\n')
    assert f'| mIoU (UperNet) | {float(rows[0]["mIoU"]):.2f} (1) |' in table
    assert '| mIoU (UperNet) | MLPCopy + distill |' in table
    assert table in log
    assert (out / 'grid.png').stat().st_size > 5_000


@pytest.fixture
def keep_cwd_and_threads():
    """main() changes to the repository and sets torch's thread count."""
    import torch

    cwd, threads = os.getcwd(), torch.get_num_threads()
    yield
    os.chdir(cwd)
    torch.set_num_threads(threads)


@pytest.mark.usefixtures('keep_cwd_and_threads')
def test_second_call_resumes_without_rerunning(tiny_grid, monkeypatch, capsys):
    """The same command again finds both runs in the CSV: nothing trains,
    the CSV is unchanged, the tables and plot are written again."""
    out, paths, _ = tiny_grid
    before = (out / 'grid.csv').read_bytes()
    (out / 'grid.md').unlink()

    def fail(*args):
        raise AssertionError(f'trained again: {args[0]}')

    monkeypatch.setattr(runner, 'train_and_test', fail)
    results = cli.main([*TINY, *paths])
    assert [r.run.setting for r in results] == ['random', 'mlpcopy+distill']
    log = capsys.readouterr().out
    assert '2 of 2 runs already in' in log and '0 to run' in log
    assert (out / 'grid.csv').read_bytes() == before
    assert (out / 'grid.md').is_file()


@pytest.mark.usefixtures('keep_cwd_and_threads')
def test_only_the_missing_runs_are_trained(tmp_path, monkeypatch):
    """With some of the grid in the CSV, only the other runs train, seed
    by seed; their rows are appended after the kept ones."""
    kept = runner.dense_grid(
        ['det', 'seg'], ['random'], [0], 64, 16, dict(det=1, seg=1)
    )
    out = tmp_path / 'grid.csv'
    for run in kept:
        engine_records.append_result(str(out), _result(records, run, 10.0))
    trained = []

    def fake(run, data_root, work_root):
        trained.append(run)
        return _result(records, run, 20.0)

    monkeypatch.setattr(runner, 'train_and_test', fake)
    monkeypatch.setattr(cli, 'ensure_data', lambda *a: None)
    grid = ['--tasks', 'det', 'seg', '--settings', 'random', 'softmax']
    grid += ['--seeds', '0', '1', '--epochs', '1', '--train-images', '16']
    cli.main([*grid, '--out', str(out), '--jobs', '1'])
    assert [(r.task, r.setting, r.seed) for r in trained] == [
        ('det', 'softmax', 0),
        ('seg', 'softmax', 0),
        ('det', 'random', 1),
        ('det', 'softmax', 1),
        ('seg', 'random', 1),
        ('seg', 'softmax', 1),
    ]
    rows = _rows(out)
    assert len(rows) == 8
    assert [r['mIoU'] or r['bbox_mAP'] for r in rows[:2]] == ['10.00'] * 2
    assert (tmp_path / 'grid.md').is_file()
    assert (tmp_path / 'grid.png').is_file()


def _result(records, run, value, seed=None, **run_fields):
    if seed is not None or run_fields:
        fields = dict(
            task=run.task,
            setting=run.setting,
            canvas=run.canvas,
            train_images=run.train_images,
            epochs=run.epochs,
            seed=run.seed if seed is None else seed,
        )
        fields.update(run_fields)
        run = records.DenseRun(**fields)
    metrics = records.TASK_METRICS[run.task]
    return records.DenseResult(
        run=run,
        iters=2,
        metrics={m: value for m in metrics},
        train_min=0.5,
        eval_min=0.1,
        device='cpu',
    )


def _synthetic(records):
    """3 seeds x 4 settings x 2 tasks; seed s adds s to every metric."""
    base = {
        'random': 10.0,
        'mlpcopy+distill': 20.0,
        'fullcopy+distill': 25.0,
        'softmax': 30.0,
    }
    results = []
    for task in ('seg', 'det'):
        for setting, value in base.items():
            for seed in range(3):
                run = records.DenseRun(task, setting, 64, 480, 5, seed)
                results.append(_result(records, run, value + seed))
    return results


def test_csv_round_trip(tmp_path):
    results = _synthetic(records)[:5] + _synthetic(records)[-2:]
    path = str(tmp_path / 'r.csv')
    for r in results:
        engine_records.append_result(path, r)
    assert engine_records.read_results(path, records.DenseResult) == results
    header = open(path).readline().strip()
    assert header == (
        'task,setting,canvas,train_images,epochs,seed,iters,mIoU,bbox_mAP,'
        'segm_mAP,train_min,eval_min,device'
    )
    assert results[1].run.name == 'seg_random_64_480_5_1'
    assert results[3].run.name == 'seg_mlpcopy-distill_64_480_5_0'


def test_tables_give_mean_std_gain_and_gap():
    results = _synthetic(records)
    text = report.markdown(results)
    lines = text.splitlines()
    assert lines[0] == (
        '| metric | Random | MLPCopy + distill | FullCopy + distill | '
        'softmax |'
    )
    # Seeds 0, 1, 2 add 0, 1, 2: mean +1, std 1.
    assert lines[2] == (
        '| mIoU (UperNet) | 11.00 +- 1.00 (3) | 21.00 +- 1.00 (3) | '
        '26.00 +- 1.00 (3) | 31.00 +- 1.00 (3) |'
    )
    assert lines[3].startswith('| box AP (Mask R-CNN) | 11.00 +- 1.00')
    assert lines[4].startswith('| mask AP (Mask R-CNN) | 11.00 +- 1.00')
    # Gains over Random: +10 points = 10 pooled std, half the gap closed.
    assert (
        '| mIoU (UperNet) | MLPCopy + distill | +10.00 | +10.0 | 50 % |'
        in lines
    )
    assert (
        '| mask AP (Mask R-CNN) | FullCopy + distill | +15.00 | +15.0 | 75 % |'
        in lines
    )
    assert '| box AP (Mask R-CNN) | softmax | +20.00 | +20.0 | - |' in lines


def test_no_gap_share_when_softmax_is_within_noise_of_random():

    def cell(mean, std):
        return report.MetricSummary(None, 'mIoU', mean, std, 3)

    random = cell(12.45, 1.10)
    # Softmax 0.01 above Random with std 2.77: no gap to take a share of.
    assert (
        report.gap_closed(cell(14.77, 0.6), random, cell(12.46, 2.77)) is None
    )
    # A gap of several pooled std: the share is the plain ratio.
    closed = report.gap_closed(cell(14.77, 0.6), random, cell(22.45, 1.0))
    assert closed == pytest.approx(23.2)


def test_one_schedule_per_table():
    results = _synthetic(records)
    run = results[0].run
    results.append(_result(records, run, 1.0, epochs=run.epochs + 1))
    with pytest.raises(ValueError, match='keep one schedule per CSV'):
        report.markdown(results)


def test_plot_has_a_panel_per_metric_error_bars_and_softmax_dashed():
    from matplotlib.container import BarContainer

    results = _synthetic(records)
    fig = draw_dense(results)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == [
        'mIoU (UperNet)',
        'box AP (Mask R-CNN)',
        'mask AP (Mask R-CNN)',
    ]
    for ax in axes:
        (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
        assert [p.get_height() for p in bars] == [11.0, 21.0, 26.0]
        dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == '--']
        assert [ln.get_ydata()[0] for ln in dashed] == [31.0]
        # One error bar per linear setting, each +-1 (the std).
        (errors,) = ax.collections[:1]
        spans = [seg[1][1] - seg[0][1] for seg in errors.get_segments()]
        assert spans == pytest.approx([2.0, 2.0, 2.0])
    labels = {t.get_text() for t in fig.legends[0].get_texts()}
    assert labels == {'std over seeds', 'softmax', 'softmax std over seeds'}


@pytest.mark.parametrize('task', ['seg', 'det'])
@pytest.mark.parametrize(
    'setting', ['random', 'mlpcopy+distill', 'fullcopy+distill', 'softmax']
)
def test_run_config(repo_root, task, setting):
    """The ready-made config with the data, size and short schedule
    swapped in, no validation (one final test) and the model and
    optimiser untouched."""
    from mmengine.config import Config

    run = records.DenseRun(task, setting, 64, 480, 5, 2)
    cfg = configs.dense_run_config(run, '/d/x', '/w/run')
    ready = Config.fromfile(configs.config_path(task, setting))
    assert cfg.optim_wrapper == ready.optim_wrapper
    distilled = 'student' in cfg.model
    assert distilled == setting.endswith('+distill')
    model = cfg.model.student if distilled else cfg.model
    if distilled:
        assert cfg.model.teacher_checkpoint == ready.model.teacher_checkpoint
        assert cfg.model.distill_losses[0].loss_weight == 50.0
    assert model.backbone.img_size == 64
    assert model.backbone.attn_cfg.type == (
        'SoftmaxAttention' if setting == 'softmax' else 'GatedLinearAttention'
    )
    assert [h.get('setting') for h in cfg.get('custom_hooks', [])] == [
        h.get('setting') for h in ready.get('custom_hooks', [])
    ]
    assert cfg.train_cfg.max_epochs == cfg.train_cfg.val_interval == 5
    assert cfg.val_cfg is None and cfg.val_dataloader is None
    assert cfg.default_hooks.checkpoint.interval == -1
    assert 'save_best' not in cfg.default_hooks.checkpoint
    assert [s.type for s in cfg.param_scheduler] == [
        s.type for s in ready.param_scheduler
    ]
    assert cfg.param_scheduler[1].end == 5
    assert cfg.test_dataloader.dataset.data_root == '/d/x/'
    assert cfg.train_dataloader.dataset.data_root == '/d/x/'
    assert cfg.randomness.seed == 2 and cfg.work_dir == '/w/run'
    if task == 'det':
        assert cfg.test_evaluator.ann_file == (
            '/d/x/annotations/instances_test.json'
        )
    else:
        assert model.data_preprocessor.size == (64, 64)


def test_final_metrics_are_percent():
    final = configs.final_metrics
    assert final('seg', {'mIoU': 41.5, 'aAcc': 90.0}) == {'mIoU': 41.5}
    det = final('det', {'coco/bbox_mAP': 0.123, 'coco/segm_mAP': 0.2})
    assert det == pytest.approx({'bbox_mAP': 12.3, 'segm_mAP': 20.0})


def test_epochs_per_task():
    parse = cli.parse_args
    assert parse([]).epochs == {'seg': 8, 'det': 3}
    assert parse(['--epochs', '2']).epochs == {'seg': 2, 'det': 2}
    both = parse(['--epochs', 'det=5', 'seg=7'])
    assert both.epochs == {'seg': 7, 'det': 5}
    assert parse(['--tasks', 'seg', '--epochs', 'seg=4']).epochs == {'seg': 4}
    for bad in (['--epochs', 'seg=4'], ['--epochs', 'seg=x', 'det=1']):
        with pytest.raises(SystemExit):
            parse(bad)
    runs = runner.dense_grid(
        ['seg', 'det'], ['random'], [0], 64, 400, both.epochs
    )
    assert [(r.task, r.epochs) for r in runs] == [('seg', 7), ('det', 5)]


def test_settings_are_transfer_settings_with_ready_made_configs():
    """Every dense setting is an mmlvit.transfer short name (or softmax),
    with or without +distill, and names a config of each task."""
    from lab.reproduction.configs import grid_settings, split_setting

    for entry in configs.DENSE_SETTINGS:
        name, _ = split_setting(entry)
        assert name == 'softmax' or name in grid_settings()
        for task in configs.TASKS:
            assert osp.isfile(configs.config_path(task, entry))
    with pytest.raises(ValueError, match="'attncopy'"):
        configs.config_path('seg', 'attncopy')
