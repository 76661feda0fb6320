"""The small-scale reproduction pipeline (teacher -> init -> distill -> eval)
on a few hundred images: every artefact is produced and well-formed."""

import csv
import os.path as osp

import pytest
from tool_runs import run_ok

from lab.reproduction import records as engine_records
from lab.reproduction.classification import cli, configs, records, report
from lab.reproduction.classification.plots import draw, plot_results
from lab.reproduction.classification.runner import grid


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
    first = run_ok(
        [*cmd, '--jobs', '2', '--train-teacher'], repo_root, timeout=1200
    )
    again = run_ok(cmd, repo_root)
    return out, first.stdout, again.stdout


def test_teacher_is_trained_and_kept(grid_run):
    from mmlvit.checkpoint import load_checkpoint_file

    out, log, _ = grid_run
    teacher = load_checkpoint_file(out / 'teacher.pth')
    assert 'backbone.layers.0.attn.qkv.weight' in teacher['state_dict']
    top1 = teacher['meta']['fashion_mnist_test_top1']
    assert 0 <= top1 <= 100
    assert f'saved to {out}/teacher.pth' in log


def test_every_grid_prints_the_teacher_accuracy(grid_run):
    """The run that trained the teacher and the one that reused it (no
    --train-teacher needed for an existing file) both name it and its
    recorded accuracy, before the runs and with the results table."""
    from mmlvit.checkpoint import load_checkpoint_file

    out, first, again = grid_run
    top1 = load_checkpoint_file(out / 'teacher.pth')['meta'][
        'fashion_mnist_test_top1'
    ]
    line = (
        f'Teacher: {out}/teacher.pth: {top1:.2f}% on the Fashion-MNIST test '
        'split (recorded when it was trained)'
    )
    assert first.count(line) == 2 and again.count(line) == 2
    assert 'No teacher at' not in again


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
    assert '6 of 6 runs already in' in again
    assert '0 to run' in again
    with open(out / 'grid.csv', newline='') as f:
        assert len(list(csv.DictReader(f))) == 6


def test_report_prints_markdown(grid_run, repo_root, python):
    out, _, _ = grid_run
    report = run_ok(
        [python, 'tools/analysis/reproduce.py', '--report']
        + ['--out', str(out / 'grid.csv')],
        repo_root,
        timeout=300,
    )
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


# The tool's modules, in process (no training below this line).


@pytest.mark.usefixtures('keep_threads')
def test_missing_teacher_is_an_error_not_a_new_teacher(tmp_path):
    """A mistyped --teacher stops the tool, naming the path and the flag
    that trains one; nothing is trained or written."""
    typo = tmp_path / 'checkpionts' / 'teacher.pth'
    args = ['--teacher', str(typo), '--work-root', str(tmp_path / 'work')]
    # Tiny data and grid, so that a regression (training a teacher) fails
    # in seconds rather than minutes.
    args += ['--train-indices', '8', '--test-indices', '8', '--epochs', '1']
    args += ['--settings', 'random', '--distill', 'off', '--threads', '1']
    with pytest.raises(SystemExit) as err:
        cli.main([*args, '--out', str(tmp_path / 'grid.csv')])
    assert str(err.value) == (
        f'No teacher checkpoint at {typo}. Check the --teacher path, or pass '
        '--train-teacher to train a new teacher and save it there (about 13 '
        'minutes on 2 CPU cores with the full data).'
    )
    assert not typo.parent.exists() and not (tmp_path / 'work').exists()


@pytest.mark.usefixtures('keep_threads')
def test_shipped_teacher_is_used_without_training(repo_root, capsys):
    """The default teacher (what `make demo` uses from a fresh clone) is
    the shipped file: found, not trained, its recorded accuracy printed."""
    from mmlvit.checkpoint import load_checkpoint_file

    shipped = osp.join(
        repo_root, 'checkpoints', 'vit-tiny-p4_softmax_fashion-mnist.pth'
    )
    from lab.reproduction.configs import DEFAULT_TEACHER

    assert DEFAULT_TEACHER == shipped
    top1 = load_checkpoint_file(shipped)['meta']['fashion_mnist_test_top1']
    assert cli.main(['--teacher-only']) == []
    out = capsys.readouterr().out
    assert out == (
        f'Teacher: {shipped}: {top1:.2f}% on the Fashion-MNIST test split '
        '(recorded when it was trained)\n'
    )


def _result(records, top1, seed=0, distill=False, epochs=10, **run):
    fields = dict(
        dataset='fashion-mnist-5k',
        operator='relu',
        setting='mlpcopy',
        distill=distill,
        lam=50.0 if distill else 0.0,
        epochs=epochs,
        seed=seed,
    )
    fields.update(run)
    return records.RunResult(records.Run(**fields), top1, 1.0, 'cpu')


def test_records_format_the_csv_columns(tmp_path):
    """Booleans as 0 / 1, lambda '0' without distillation and a float's
    text with it, two decimals of top-1, one of the wall time."""
    plain = _result(records, 80.284, seed=2)
    distilled = _result(records, 83.0, distill=True, lam=5)
    assert plain.run.name == 'fashion-mnist-5k_relu_mlpcopy_0_0_10_2'
    assert distilled.run.name == 'fashion-mnist-5k_relu_mlpcopy_1_5.0_10_0'
    row = plain.row()
    assert ','.join(row.values()) == (
        'fashion-mnist-5k,relu,mlpcopy,0,0,10,2,80.28,1.0,cpu'
    )
    path = tmp_path / 'rows.csv'
    for result in (plain, distilled):
        engine_records.append_result(str(path), result)
    back = engine_records.read_results(str(path), records.RunResult)
    assert [r.run for r in back] == [plain.run, distilled.run]
    assert back[0].top1 == 80.28 and back[1].run.lam == 5.0
    assert path.read_bytes().startswith(
        b'dataset,operator,setting,distill,lambda,epochs,seed,top1,wall_s,'
        b'device\r\n'
    )


def test_grid_is_seed_major_with_one_softmax_reference():
    runs = grid(
        ['relu', 'gla'],
        ['random', 'mlpcopy+distill', 'softmax'],
        'off',
        [5.0, 50.0],
        [10],
        [0, 1],
        ['fashion-mnist-5k'],
    )
    assert [r.seed for r in runs] == [0] * 7 + [1] * 7
    assert [(r.operator, r.setting, r.distill, r.lam) for r in runs[:7]] == [
        ('relu', 'random', False, 0.0),
        ('relu', 'mlpcopy', True, 5.0),
        ('relu', 'mlpcopy', True, 50.0),
        ('softmax', 'softmax', False, 0.0),
        ('gla', 'random', False, 0.0),
        ('gla', 'mlpcopy', True, 5.0),
        ('gla', 'mlpcopy', True, 50.0),
    ]
    assert runs[3].name == 'fashion-mnist-5k_softmax_softmax_0_0_10_0'


def test_operator_choices_come_from_the_registry():
    from mmlvit.models.attentions import registered_operators

    linear = {
        cls.short_name
        for cls in registered_operators().values()
        if cls.linear_cost and cls.short_name
    }
    assert {'elu', 'relu', 'inline', 'gla', 'mhla', 'ttt'} <= linear
    assert set(configs.linear_operators()) == linear
    assert 'softmax' not in linear
    assert cli.parse_args(['--operators', *linear]).operators
    with pytest.raises(SystemExit):
        cli.parse_args(['--operators', 'softmax'])
    # The only per-operator option: GLA's chunk size at 50 tokens.
    assert configs.operator_cfg('gla') == dict(
        type='GatedLinearAttention', chunk_size=16
    )
    assert configs.operator_cfg('relu') == dict(type='ReLULinearAttention')


@pytest.fixture
def test_only_operator():
    """A linear operator registered by this test only (patches only, like
    MHLA and TTT), removed from the registry afterwards."""
    from mmpretrain.registry import MODELS

    from mmlvit.models.attentions import BaseAttention

    class ReproduceToyAttention(BaseAttention):
        short_name = 'reprotoy'
        patch_tokens_only = True

        def mix_tokens(self, x, hw_shape):
            _, _, v = self.split_heads(self.qkv(x))
            return self.output(self.merge_heads(v))

    MODELS.register_module(module=ReproduceToyAttention)
    yield ReproduceToyAttention
    MODELS._module_dict.pop('ReproduceToyAttention')


def test_a_registered_operator_becomes_a_choice(test_only_operator):
    from mmpretrain.registry import MODELS

    args = cli.parse_args(['--operators', 'reprotoy', 'gla'])
    assert args.operators == ['reprotoy', 'gla']
    run = records.Run('mnist-5k', 'reprotoy', 'mlpcopy', False, 0.0, 10, 0)
    cfg = configs.run_config(run, '/teacher.pth', '/work')
    assert cfg.model.backbone.attn_cfg == dict(type='ReproduceToyAttention')
    backbone = MODELS.build(cfg.model.backbone)
    assert backbone.with_cls_token is False
    assert backbone.out_type == 'avg_featmap'
    assert backbone.pos_embed_type == 'sincos'


def test_settings_come_from_transfer():
    from mmlvit.models.losses import PAPER_DISTILL_WEIGHT
    from mmlvit.transfer import SETTINGS

    assert list(configs.grid_settings()) == [
        s.short_name for s in SETTINGS.values()
    ]
    choices = cli.setting_choices()
    for name in ('random', 'attncopy', 'mlpcopy', 'fullcopy', 'softmax'):
        assert name in choices
    assert 'mlpcopy+distill' in choices and 'softmax+distill' not in choices
    assert configs.init_setting('random') is None
    assert configs.init_setting('attncopy') == 'Copy'
    assert configs.init_setting('softmax') == 'FullCopy'
    # Distilled runs weigh the loss by the paper's lambda unless told.
    assert cli.parse_args([]).lambdas == [PAPER_DISTILL_WEIGHT] == [50.0]


@pytest.mark.parametrize(
    'operator,setting,distill,hooks',
    [
        ('gla', 'random', False, []),
        ('relu', 'random', True, []),
        ('mhla', 'mlpcopy', False, ['MLPCopy']),
        ('mhla', 'fullcopy', True, ['FullCopy']),
        ('softmax', 'softmax', False, ['FullCopy']),
    ],
)
def test_run_config_hooks(operator, setting, distill, hooks):
    """Random copies nothing (no init hook); MHLA needs no clamp hook."""
    run = records.Run(
        'fashion-mnist-5k', operator, setting, distill, 30.0, 3, 1
    )
    cfg = configs.run_config(run, '/teacher.pth', '/work')
    assert [h.type for h in cfg.custom_hooks] == [
        'SoftmaxToLinearInitHook'
    ] * len(hooks)
    assert [h.setting for h in cfg.custom_hooks] == hooks
    assert cfg.train_cfg.max_epochs == 3 and cfg.randomness.seed == 1
    if distill:
        assert cfg.model.distill_losses[0].loss_weight == 30.0
        assert cfg.model.teacher_checkpoint == '/teacher.pth'


def _schedule_results(records):
    """MLPCopy with and without distillation, 10 and 40 epochs, 2 seeds."""
    return [
        _result(
            records, 70 + epochs / 10 + seed + distill, seed, distill, epochs
        )
        for distill in (False, True)
        for epochs in (10, 40)
        for seed in (0, 1)
    ]


def test_summary_pools_seeds():
    results = _schedule_results(records)
    table = report.summarise(results)
    assert len(table) == 4
    first = table[0]  # mlpcopy, no distillation, 10 epochs
    assert (first.distill, first.lam, first.epochs) == (False, 0.0, 10)
    assert first.mean == pytest.approx(71.5)  # mean of 71 and 72
    assert first.std == pytest.approx(0.7071, abs=1e-4)
    assert first.n == 2
    assert report.sweep_axis(table) == 'epochs'


def _legend_clear_of_axes(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    return all(not box.overlaps(ax.get_window_extent()) for ax in fig.axes)


def test_bar_plot_has_seed_error_bars_and_a_clear_legend(tmp_path):
    from matplotlib.container import ErrorbarContainer

    from lab.reproduction.figures import pyplot

    results = (
        [
            _result(
                records,
                75 + seed + 3 * distill + op_shift,
                seed,
                distill,
                operator=op,
                setting=setting,
            )
            for seed in (0, 1, 2)
            for distill in (False, True)
            for op, op_shift in (('relu', 0), ('gla', 1))
            for setting in ('random', 'attncopy', 'mlpcopy', 'fullcopy')
        ]
        + [
            _result(records, 88, seed, operator='softmax', setting='softmax')
            for seed in (0, 1)
        ]
        + [
            # One seed only: no error bar for this configuration.
            _result(records, 60, 0, dataset='mnist-5k', operator='relu')
        ]
    )
    fig = draw(results)
    fashion, mnist = fig.axes
    assert fashion.get_title() == 'fashion-mnist-5k'
    assert [t.get_text() for t in fashion.get_xticklabels()] == [
        'Random',
        'Copy',
        'MLPCopy',
        'FullCopy',
    ]
    bars = [c for c in fashion.containers if isinstance(c, ErrorbarContainer)]
    # Per operator: the w/o tops and the w/ tops, 4 settings each.
    assert len(bars) == 4
    assert all(len(c.lines[2][0].get_segments()) == 4 for c in bars)
    assert not any(isinstance(c, ErrorbarContainer) for c in mnist.containers)
    assert _legend_clear_of_axes(fig)
    pyplot().close(fig)
    plot_results(results, tmp_path / 'grid.png')
    assert (tmp_path / 'grid.png').stat().st_size > 10_000


def test_sweep_plot(tmp_path):
    """Results that vary epochs get top-1 against epochs, with error bars
    where there are seeds, the legend outside the axes."""
    from lab.reproduction.figures import pyplot

    results = _schedule_results(records)
    fig = draw(results)
    (ax,) = fig.axes
    assert ax.get_xlabel() == 'epochs'
    assert len(ax.containers) == 2
    assert all(c.has_yerr for c in ax.containers)
    assert _legend_clear_of_axes(fig)
    pyplot().close(fig)
    plot_results(results, tmp_path / 'schedule.png')
    assert (tmp_path / 'schedule.png').stat().st_size > 10_000
