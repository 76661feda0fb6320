"""The reproduction engine's shared pieces (lab.reproduction), tested
once for every task: run records and their CSV, resuming from the committed
results, running a grid, seed statistics, plots' error bars, the settings a
grid names and the short schedule."""

import os.path as osp
from dataclasses import dataclass, field

import pytest

from lab.reproduction import configs, figures, records, runner, summary
from lab.reproduction.classification import cli as classification_cli
from lab.reproduction.classification import runner as classification
from lab.reproduction.classification.records import RunResult
from lab.reproduction.cli import results_to_report, run_missing
from lab.reproduction.dense import cli as dense_cli
from lab.reproduction.dense import runner as dense
from lab.reproduction.dense.records import DenseResult


@dataclass(frozen=True)
class ToyConfiguration:
    label: str
    flag: bool
    weight: float = field(metadata={'column': 'w'})


@dataclass(frozen=True)
class ToyRun(records.GridRun, ToyConfiguration):
    CONFIGURATION = ToyConfiguration
    seed: int


@dataclass(frozen=True)
class ToyResult(records.GridResult):
    RUN = ToyRun
    run: ToyRun
    score: float = field(metadata={'format': '.1f'})
    extra: dict = field(
        default_factory=dict, metadata={'columns': ('x', 'y'), 'format': '.2f'}
    )

    def progress(self):
        return f'score {self.score:.1f}'


def toy_train(run, offset):
    """A grid's train-and-test function: a score from the run."""
    return ToyResult(run, run.weight + offset)


def test_run_record_key_name_and_row():
    run = ToyRun('a+distill', True, 0.5, 3)
    assert ToyRun.key_columns() == ('label', 'flag', 'w', 'seed')
    assert run.key() == ('a+distill', '1', '0.5', '3')
    assert run.name == 'a-distill_1_0.5_3'
    assert run.key_row() == dict(
        label='a+distill', flag='1', w='0.5', seed='3'
    )
    assert ToyRun.from_row(run.key_row()) == run
    assert ToyRun.from_row(dict(run.key_row(), flag='0')).flag is False
    assert run.configuration() == ToyConfiguration('a+distill', True, 0.5)


def test_csv_header_once_rows_appended(tmp_path):
    """Formats from the fields' metadata, a dict's absent columns empty."""
    path = str(tmp_path / 'sub' / 'grid.csv')
    assert records.read_rows(path) == []
    first = ToyResult(ToyRun('a', False, 1.0, 0), 1.0, {'y': 0.125})
    second = ToyResult(ToyRun('a', False, 2.0, 0), 2.0)
    for result in (first, second):
        records.append_result(path, result)
    with open(path, 'rb') as f:
        assert f.read() == (
            b'label,flag,w,seed,score,x,y\r\n'
            b'a,0,1.0,0,1.0,,0.12\r\n'
            b'a,0,2.0,0,2.0,,\r\n'
        )
    assert records.read_results(path, ToyResult) == [
        ToyResult(ToyRun('a', False, 1.0, 0), 1.0, {'y': 0.12}),
        second,
    ]


def test_grid_runs_appends_each_result_with_progress(tmp_path, capsys):
    path = str(tmp_path / 'grid.csv')
    todo = [ToyRun('a', False, w, 0) for w in (1.0, 2.0)]
    runner.run_grid(todo, path, toy_train, (10,))
    assert [r.score for r in records.read_results(path, ToyResult)] == [
        11.0,
        12.0,
    ]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('[1/2] a_0_1.0_0: score 11.0; grid ETA ')
    assert lines[1].startswith('[2/2] a_0_2.0_0: score 12.0; grid ETA ')


class Options:
    """What ``run_missing`` reads of a command line's options."""

    def __init__(self, out):
        self.out, self.jobs, self.threads = out, 1, 1


def test_only_the_runs_missing_from_the_csv_are_trained(tmp_path, capsys):
    path = str(tmp_path / 'grid.csv')
    kept = ToyRun('a', False, 1.0, 0)
    records.append_result(path, ToyResult(kept, 5.0))
    runs = [kept, ToyRun('a', True, 1.0, 0), ToyRun('a', False, 1.0, 1)]
    run_missing(Options(path), runs, ToyResult, toy_train, (0,))
    assert '1 of 3 runs already in' in capsys.readouterr().out
    back = records.read_results(path, ToyResult)
    assert [r.run for r in back] == runs and back[0].score == 5.0


def test_a_report_needs_results(tmp_path):
    path = str(tmp_path / 'none.csv')
    with pytest.raises(SystemExit, match=f'No results in {path}.'):
        results_to_report(path, ToyResult)
    records.append_result(path, ToyResult(ToyRun('a', False, 1.0, 0), 2.0))
    assert [r.score for r in results_to_report(path, ToyResult)] == [2.0]


# The committed results: each CSV, the task's result record, the command
# that made it (docs/reproduction.md, docs/dense_reproduction.md).
GRID = ['--settings', 'random', 'attncopy', 'mlpcopy', 'fullcopy', 'softmax']
COMMITTED = {
    'fashion_mnist': [
        *['--operators', 'relu', 'elu', 'inline', 'gla', *GRID],
        *['--distill', 'both', '--seeds', '0', '1', '2'],
    ],
    'mnist5k': [
        *['--targets', 'mnist-5k', '--operators', 'relu', 'gla', *GRID],
        *['--distill', 'both', '--seeds', '0'],
    ],
    'lambda': [
        *['--operators', 'relu', '--settings', 'mlpcopy+distill'],
        *['--lambdas', '5', '10', '30', '50', '100'],
    ],
    'schedule': [
        *['--operators', 'relu', '--distill', 'off', '--settings', 'random'],
        *['mlpcopy', 'mlpcopy+distill', 'fullcopy+distill', 'softmax'],
        *['--epochs', '10', '40'],
    ],
    'components': [
        *['--targets', 'fashion-mnist-5k', 'mnist-5k'],
        *['--operators', 'relu', 'gla', '--settings', 'random', 'mlpcopy'],
        *['mlpcopy+norms', 'mlpcopy+embeddings', 'fullcopy-attn'],
        *['fullcopy-mlp', 'fullcopy', 'fullcopy-attn+distill'],
        *['fullcopy+distill', '--distill', 'off', '--seeds', '0', '1', '2'],
    ],
    'dense_fashion_mnist': ['--seeds', '0', '1', '2'],
}


def committed_grid(name, out):
    """The runs of the command that made ``results/NAME.csv``, and the
    task's result record."""
    argv = [*COMMITTED[name], '--out', out]
    if name.startswith('dense'):
        a = dense_cli.parse_args(argv)
        runs = dense.dense_grid(
            a.tasks, a.settings, a.seeds, a.canvas, a.train_images, a.epochs
        )
        return runs, DenseResult
    a = classification_cli.parse_args(argv)
    runs = classification.grid(
        a.operators,
        a.settings,
        a.distill,
        a.lambdas,
        a.epochs,
        a.seeds,
        a.targets,
    )
    return runs, RunResult


def refuse(run, *args):
    raise AssertionError(f'{run.name} is in the CSV but trained again')


@pytest.mark.parametrize('name', sorted(COMMITTED))
def test_committed_results_resume_as_finished(repo_root, name, capsys):
    """Every run of the command that made a committed CSV is recognised as
    finished: the same command trains nothing."""
    out = osp.join(repo_root, 'results', f'{name}.csv')
    runs, result_type = committed_grid(name, out)
    run_missing(Options(out), runs, result_type, refuse, ())
    assert f'{len(runs)} of {len(runs)} runs already in' in (
        capsys.readouterr().out
    )
    # The runs' keys are the rows' key columns as the file holds them.
    columns = result_type.RUN.key_columns()
    rows = records.read_rows(out)
    assert len(rows) == len(runs)
    assert {tuple(row[c] for c in columns) for row in rows} == {
        run.key() for run in runs
    }


@pytest.mark.parametrize('name', sorted(COMMITTED))
def test_committed_results_round_trip_byte_for_byte(repo_root, tmp_path, name):
    """Reading a committed CSV into records and writing them back gives
    the same bytes: resuming appends rows of the same format."""
    source = osp.join(repo_root, 'results', f'{name}.csv')
    _, result_type = committed_grid(name, source)
    copy = str(tmp_path / f'{name}.csv')
    for result in records.read_results(source, result_type):
        records.append_result(copy, result)
    with open(source, 'rb') as a, open(copy, 'rb') as b:
        assert a.read() == b.read()


@dataclass(frozen=True)
class Cell:
    mean: float
    std: float
    n: int


def test_seed_statistics_and_cells():
    mean, std = summary.mean_std([71.0, 72.0])
    assert mean == pytest.approx(71.5) and std == pytest.approx(0.7071, 1e-4)
    assert summary.mean_std([3.0]) == (3.0, 0.0)
    assert summary.cell(Cell(71.5, 0.7071, 2)) == '71.50 +- 0.71 (2)'
    assert summary.cell(Cell(80.0, 0.0, 1)) == '80.00 (1)'


def test_teacher_line_without_a_recorded_accuracy(tmp_path):
    import torch

    path = str(tmp_path / 't.pth')
    torch.save({'state_dict': {}}, path)
    assert summary.teacher_line(path) == (
        f'Teacher: {path}: no recorded accuracy'
    )


def test_error_bars_only_where_there_are_seeds():
    plt = figures.pyplot()
    fig, ax = plt.subplots()
    cells = [Cell(1.0, 0.5, 3), None, Cell(2.0, 0.0, 1), Cell(3.0, 1.0, 2)]
    figures.seed_error_bars(ax, [0, 1, 2, 3], cells, capsize=3)
    (bars,) = ax.containers
    segments = bars.lines[2][0].get_segments()
    # (x, low, high) of each bar: the cells with 3 and 2 seeds.
    assert [(s[0][0], s[0][1], s[1][1]) for s in segments] == [
        (0, 0.5, 1.5),
        (3, 2.0, 4.0),
    ]
    assert bars.get_label() == figures.STD_LABEL
    plt.close(fig)


def test_settings_are_the_transfer_settings():
    from mmlvit.transfer import SETTINGS

    assert [s.name for s in configs.grid_settings().values()] == list(SETTINGS)
    assert configs.split_setting('mlpcopy', 'both') == (
        'mlpcopy',
        (False, True),
    )
    assert configs.split_setting('mlpcopy+distill', 'off') == (
        'mlpcopy',
        (True,),
    )
    assert configs.setting_title('mlpcopy+distill') == 'MLPCopy + distill'
    assert configs.setting_title('attncopy') == 'Copy'
    assert configs.setting_title('softmax') == 'softmax'
    with pytest.raises(KeyError):
        configs.setting_title('nocopy')


def test_schedule_warms_up_one_epoch_then_cosine():
    assert [s['type'] for s in configs.schedule(1)] == ['CosineAnnealingLR']
    warmup, cosine = configs.schedule(5)
    assert (warmup['begin'], warmup['end']) == (0, 1)
    assert (cosine['begin'], cosine['end']) == (1, 5)


def test_configs_come_from_the_checkout_else_the_installed_copy(
    repo_root, tmp_path, monkeypatch
):
    assert configs.ROOT == repo_root
    installed = str(tmp_path / 'site-packages' / 'mmlvit' / '.mim')
    checkout = str(tmp_path / 'site-packages')
    monkeypatch.setattr(configs, 'SHIPPED_ROOTS', (installed, checkout))
    assert configs._repository_tree() == installed
    monkeypatch.setattr(configs, 'SHIPPED_ROOTS', (installed, repo_root))
    assert configs._repository_tree() == repo_root
