"""tools/analysis/gpu_report.py without a GPU: the refusal, the generated
ImageNet folder and teacher checkpoint for the flagship run, the parts'
commands, the time-limited part runner, the report from fake parts (one
of them still running) and a report stopped from outside."""

import json
import os
import signal
import subprocess
import sys
import tarfile
import time

import pytest
import torch
from mmengine.config import Config

from lab.benchmarks import flagship_run

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason='has CUDA')


@pytest.fixture(scope='module')
def report(load_tool):
    return load_tool('tools/analysis/gpu_report.py')


@no_cuda
def test_refuses_without_a_gpu(report, tmp_path, capsys):
    assert report.main([str(tmp_path / 'out')]) == 2
    assert 'needs a CUDA GPU' in capsys.readouterr().err
    assert not (tmp_path / 'out').exists()


def test_imagenet_folder_and_options_fit_the_flagship_config(
    load_tool, tmp_path
):
    root = flagship_run.make_imagenet_folder(
        str(tmp_path / 'imagenet'), num_train=6, num_val=3, size=(40, 32)
    )
    lines = (tmp_path / 'imagenet' / 'meta' / 'train.txt').read_text()
    assert lines.splitlines()[1] == 'train_00001.JPEG 1'
    assert len(os.listdir(tmp_path / 'imagenet' / 'val')) == 3

    train = load_tool('tools/train.py')
    command = flagship_run.flagship_command(str(tmp_path), root, 'teacher.pth')
    argv = command[2:]  # after python tools/train.py
    cfg = train.merge_args(
        Config.fromfile(flagship_run.FLAGSHIP), train.parse_args(argv)
    )
    assert cfg.model.teacher_checkpoint == 'teacher.pth'
    assert cfg.optim_wrapper.type == 'SkipNonFiniteAmpOptimWrapper'
    assert cfg.optim_wrapper.dtype == 'bfloat16'
    assert cfg.train_cfg.max_epochs == 2
    assert cfg.log_processor.window_size == 1
    assert cfg.default_hooks.logger.interval == 1
    assert cfg.default_hooks.checkpoint.save_last is False
    from mmlvit.datasets import check_data_roots

    check_data_roots(cfg)  # raises if a loader's data is missing
    from mmpretrain.registry import DATASETS

    dataset = DATASETS.build(cfg.train_dataloader.dataset)
    assert len(dataset) == 6
    item = dataset[0]
    assert item['inputs'].shape == (3, 224, 224)
    assert item['data_samples'].gt_label.item() == 0


def test_teacher_checkpoint_loads_into_the_config_teacher(tmp_path):
    from mmpretrain.registry import MODELS

    cfg = Config.fromfile(flagship_run.FLAGSHIP)
    cfg.model.teacher.backbone.arch = 'deit-tiny'  # small for the test
    cfg.model.teacher.head.in_channels = 192
    path = flagship_run.save_teacher(cfg, str(tmp_path / 'teacher.pth'))
    state = torch.load(path, weights_only=True)['state_dict']
    teacher = MODELS.build(cfg.model.teacher)
    teacher.load_state_dict(state, strict=True)
    assert 'backbone.layers.11.attn.qkv.weight' in state


def test_part_commands_are_valid_tool_arguments(report, load_tool, tmp_path):
    for part, name in [
        ('attention', 'benchmark_attention'),
        ('model', 'benchmark_model'),
        ('profile', 'profile_step'),
        ('distill', 'benchmark_distill'),
    ]:
        command, _ = report.part_command(part, str(tmp_path), 85)
        assert command[:2] == [sys.executable, f'tools/analysis/{name}.py']
        argv = ['cpu' if a == 'cuda' else a for a in command[2:]]
        args = load_tool(f'tools/analysis/{name}.py').parse_args(argv)
        assert args.dtype == 'bf16'
        if part != 'distill':
            assert args.max_seconds == 85 - report.STARTUP_S
    command, _ = report.part_command('attention', str(tmp_path), 85)
    assert '65537' in command and '16385' in command
    command, _ = report.part_command('model', str(tmp_path), 150)
    i = command.index('--batch-sizes')
    assert command[i + 1 : i + 5] == ['128', '32', '8', '2']
    command, table = report.part_command('profile', str(tmp_path), 40)
    args = load_tool('tools/analysis/profile_step.py').parse_args(
        ['cpu' if a == 'cuda' else a for a in command[2:]]
    )
    assert (args.resolution, args.batch_size) == (224, 128)
    assert table == str(tmp_path / 'profile.md')
    command, _ = report.part_command('tests', str(tmp_path), 70)
    assert command[1:5] == ['-m', 'pytest', '-m', 'cuda']
    assert sum(report.BUDGETS.values()) <= 460


def test_variants_part_only_when_asked_for(report, tmp_path):
    """The launch variants are a part of their own, outside the default
    report and its 8 minutes."""
    assert 'variants' not in report.parse_args(['out']).parts
    assert report.parse_args(['out', '--parts', 'variants']).parts == [
        'variants'
    ]
    command, table = report.part_command('variants', str(tmp_path), 240)
    assert command[1].endswith('launch_variants.py')
    i = command.index('--device')
    assert command[i + 1] == 'cuda'
    assert command[command.index('--max-seconds') + 1] == str(240 - 30)
    assert table == str(tmp_path / 'variants.md')


def test_tests_part_runs_in_parallel_where_xdist_is(report, monkeypatch):
    monkeypatch.setattr(report.os, 'cpu_count', lambda: 16)
    command, _ = report.part_command('tests', 'work', 70)
    assert command[-2:] == ['-n', str(report.TEST_WORKERS)]
    monkeypatch.setattr(report.os, 'cpu_count', lambda: 4)
    assert report.part_command('tests', 'work', 70)[0][-2:] == ['-n', '4']
    monkeypatch.setattr(report.os, 'cpu_count', lambda: 1)
    assert '-n' not in report.part_command('tests', 'work', 70)[0]
    monkeypatch.setattr(report.os, 'cpu_count', lambda: 16)
    find_spec = report.importlib.util.find_spec
    monkeypatch.setattr(
        report.importlib.util,
        'find_spec',
        lambda name: None if name == 'xdist' else find_spec(name),
    )
    assert '-n' not in report.part_command('tests', 'work', 70)[0]


def test_test_summary_of_serial_and_xdist_logs(report):
    serial = [
        'tests/ops/test_a.py::test_x PASSED',
        'tests/ops/test_a.py::test_z SKIPPED (no GPU)',
        'tests/ops/test_a.py::test_y FAILED',
        'FAILED tests/ops/test_a.py::test_y - AssertionError',
        '==== 1 failed, 1 passed, 1 skipped in 3.10s ====',
    ]
    xdist = [
        '8 workers [3 items]',
        '[gw1] [ 33%] PASSED tests/ops/test_a.py::test_x ',
        '[gw0] [ 66%] SKIPPED tests/ops/test_a.py::test_z ',
        '[gw1] [100%] FAILED tests/ops/test_a.py::test_y ',
        '[gw1] linux -- Python 3.12.3 /usr/bin/python',
        'FAILED tests/ops/test_a.py::test_y - AssertionError',
        '==== 1 failed, 1 passed, 1 skipped in 3.10s ====',
    ]
    for log in (serial, xdist):
        summary = report.part_table('tests', dict(lines=enumerate(log)), None)
        assert summary[:5] == [
            '| outcome | tests |',
            '|---|---:|',
            '| FAILED | 1 |',
            '| PASSED | 1 |',
            '| SKIPPED | 1 |',
        ]
        assert summary[-1] == (
            'FAILED tests/ops/test_a.py::test_y - AssertionError'
        )


def test_run_part_stops_a_part_at_its_limit(report, tmp_path):
    log = tmp_path / 'log.txt'
    script = 'import time; print("started", flush=True); time.sleep(60)'
    result = report.run_part(
        [sys.executable, '-c', script], 2, str(log), env=dict(os.environ)
    )
    assert result['timed_out'] and result['wall_s'] < 20
    assert [line for _, line in result['lines']] == ['started']
    assert 'stopped after 2 s' in log.read_text()
    result = report.run_part(
        [sys.executable, '-c', 'print(1)'], 30, str(log), env=dict(os.environ)
    )
    assert result['returncode'] == 0 and not result['timed_out']


def test_iteration_times_from_mmengine_log_lines():
    lines = [
        (5.0, 'loading'),
        (40.5, '12/04 14:00:01 - mmengine - INFO - Epoch(train)   [1][1/5]  '
               'lr: 1e-4  eta: 0:01:00  time: 30.1234  data_time: 0.5  '
               'loss: 7.0'),
        (41.0, 'Epoch(train)   [1][ 2/5]  lr: 1e-4  time: 0.3100  '
               'data_time: 0.0100'),
    ]  # fmt: skip
    assert flagship_run.iteration_times(lines) == (40.5, [30.1234, 0.31])
    assert flagship_run.iteration_times([(1.0, 'no training')]) == (None, [])


def fake_parts(report, tmp_path):
    work = tmp_path / 'work'
    (work / 'attention').mkdir(parents=True)
    (work / 'attention' / 'log.txt').write_text('SoftmaxAttention N=197\n')
    (work / 'attention' / 'attention_benchmark.md').write_text(
        '| operator | N |\n|---|---:|\n| SoftmaxAttention | 197 |\n'
    )
    (work / 'flagship' / 'data').mkdir(parents=True)
    (work / 'flagship' / 'data' / 'teacher.pth').write_bytes(b'0' * 10)
    pytest_lines = [
        'tests/ops/test_a.py::test_x PASSED',
        'tests/ops/test_a.py::test_y FAILED',
        'FAILED tests/ops/test_a.py::test_y - AssertionError',
        '==== 1 failed, 1 passed in 3.10s ====',
    ]
    base = dict(returncode=0, timed_out=False, wall_s=10.0, budget_s=70)
    parts = dict(
        tests=dict(base, returncode=1, lines=list(enumerate(pytest_lines))),
        attention=dict(base, lines=[]),
        model=dict(base, timed_out=True, returncode=-9,
                   lines=[(1.0, 'softmax 224px forward: 8.7e+03 img/s')]),
        distill=dict(base, lines=[], error='RuntimeError: broken'),
        flagship=dict(base, lines=[], flagship=dict(
            prepare_s=4.0, first_iteration_line_s=40.5,
            iteration_times_s=[30.0, 0.3, 0.32])),
    )  # fmt: skip
    tables = {'attention': str(work / 'attention' / 'attention_benchmark.md')}
    for part, result in parts.items():
        result['command'] = ['python', part]
        result['table'] = report.part_table(part, result, tables.get(part))
    return parts, work


def test_report_from_fake_parts(report, tmp_path):
    parts, work = fake_parts(report, tmp_path)
    out = tmp_path / 'out'
    env = dict(GPU='NVIDIA H200', torch='2.11.0', triton='3.6.0')
    report.write_report(str(out), env, parts, str(work))
    names = sorted(os.listdir(out))
    assert len(names) <= 8 and all((out / n).is_file() for n in names)
    assert names == [
        'flagship.png', 'parts.png', 'report.json', 'report.md',
        'report_bundle.tar.gz',
    ]  # fmt: skip
    md = (out / 'report.md').read_text()
    assert '| GPU | NVIDIA H200 |' in md
    assert '| model | 70 | 10.0 | timed out |' in md
    assert '| tests | 70 | 10.0 | exit 1 |' in md
    assert '| FAILED | 1 |' in md and '| PASSED | 1 |' in md
    assert '| SoftmaxAttention | 197 |' in md
    assert 'softmax 224px forward: 8.7e+03 img/s' in md  # the log's tail
    assert 'RuntimeError: broken' in md
    assert '| process start to the first iteration log line (s) | 40.5 |' in md
    assert '| median of the later iterations (s) | 0.310 |' in md
    saved = json.loads((out / 'report.json').read_text())
    assert saved['parts']['model']['timed_out'] is True
    with tarfile.open(out / 'report_bundle.tar.gz') as tar:
        members = tar.getnames()
    assert 'report.md' in members and 'parts/attention/log.txt' in members
    assert not any('teacher.pth' in m for m in members)


def test_report_lists_a_running_part_with_its_log_so_far(report, tmp_path):
    parts, work = fake_parts(report, tmp_path)
    del parts['flagship']
    (work / 'flagship').mkdir(exist_ok=True)
    (work / 'flagship' / 'log.txt').write_text(
        '$ python tools/train.py flagship.py --amp\nEpoch(train) [1][1/5]\n'
    )
    started = report.time.monotonic() - 12.0
    parts['flagship'] = report.unfinished(str(work / 'flagship'), 90, started)
    out = tmp_path / 'out'
    report.write_report(str(out), dict(GPU='NVIDIA H200'), parts, str(work))
    md = (out / 'report.md').read_text()
    row = next(line for line in md.splitlines() if line.startswith('| flag'))
    assert row.startswith('| flagship | 90 | 1') and row.endswith('running |')
    assert '`python tools/train.py flagship.py --amp`' in md
    assert 'The last lines of its log (running):' in md
    assert 'Epoch(train) [1][1/5]' in md
    assert '| model | 70 | 10.0 | timed out |' in md  # the parts done
    saved = json.loads((out / 'report.json').read_text())
    assert saved['parts']['flagship']['state'] == 'running'
    with tarfile.open(out / 'report_bundle.tar.gz') as tar:
        assert 'parts/flagship/log.txt' in tar.getnames()
    assert not [n for n in os.listdir(out) if n.endswith('.tmp')]


STOPPED_RUN = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location('gpu_report', sys.argv[1])
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)
report.cuda_unavailable_reason = lambda: None
report.environment = lambda repo_root: dict(GPU='none (test)')
report.REFRESH_S = 0.2
script = ('import os, time; print("pid", os.getpid(), flush=True); '
          'print("half-way", flush=True); time.sleep(120)')
report.part_command = lambda part, work, budget: (
    [sys.executable, '-c', script], None)
sys.exit(report.main(sys.argv[2:]))
"""


def test_a_report_stopped_from_outside_keeps_the_running_part(
    report, tmp_path
):
    out, work = tmp_path / 'out', tmp_path / 'work'
    argv = [sys.executable, '-c', STOPPED_RUN, report.__file__, str(out)]
    argv += ['--parts', 'attention', 'model', '--work-dir', str(work)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    bundle = out / 'report_bundle.tar.gz'

    def bundled_log():
        if not bundle.exists():
            return ''
        with tarfile.open(bundle) as tar:
            if 'parts/attention/log.txt' not in tar.getnames():
                return ''
            return tar.extractfile('parts/attention/log.txt').read().decode()

    deadline = time.monotonic() + 60
    while 'half-way' not in bundled_log():  # a refresh while it runs
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    md = (out / 'report.md').read_text()
    assert '| attention | 60 |' in md and 'running |' in md
    assert 'half-way' in md
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    md = (out / 'report.md').read_text()
    assert 'stopped from outside (SIGTERM) |' in md
    assert '## model' not in md  # never started
    log = bundled_log()
    assert 'half-way' in log and 'stopped from outside' in log
    pid = int(log.split('pid ')[1].split()[0])
    with pytest.raises(ProcessLookupError):  # the part went with it
        os.kill(pid, 0)
