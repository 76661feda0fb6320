"""lab.benchmarks: timing, memory, the case runner, ratios, tables and
verdicts on the CPU (and the CUDA timing on a GPU)."""

import argparse
import json
import time

import pytest
import torch

from lab.benchmarks import (
    Deadline,
    add_device_arguments,
    check_device_arguments,
    compare,
    cuda_peak_growth_mib,
    interleaved_times,
    markdown_table,
    measure_step,
    run_grid,
    run_in_process,
    status,
    steady_seconds,
    time_call,
    verdict,
)

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason='has CUDA')


def sleeper(seconds):
    return lambda: time.sleep(seconds)


def test_interleaved_times_time_the_calls_and_the_first_apart():
    calls = []

    def first_slow():
        time.sleep(0.05 if not calls else 0.005)
        calls.append(1)

    times = interleaved_times(dict(a=first_slow, b=sleeper(0.02)), 3)
    assert times['a']['first_s'] >= 0.05
    assert len(times['a']['wall']) == len(times['b']['cpu']) == 3
    assert 0.005 <= times['a']['median_s'] < 0.02 <= times['b']['median_s']
    assert len(calls) == 4


def test_measure_step_on_the_cpu_keeps_to_its_budget():
    result = measure_step(sleeper(0.02), repeats=10, budget_s=0.05)
    assert 2 <= len(result['times']) <= 4
    assert all(t >= 0.02 for t in result['times'])
    assert result['warm_up_s'] >= 0.02 and result['peak_mib'] >= 0
    # A warm-up longer than the budget is the measurement.
    result = measure_step(sleeper(0.03), repeats=3, budget_s=0.01)
    assert result['times'] == [result['warm_up_s']]


def test_steady_seconds_best_on_cpu_median_on_cuda():
    assert steady_seconds([3.0, 1.0, 2.0], 'cpu') == 1.0
    assert steady_seconds([3.0, 1.0, 2.0], 'cuda') == 2.0


def test_deadline():
    assert not Deadline(None).expired()
    deadline = Deadline(0.01)
    time.sleep(0.02)
    assert deadline.expired()
    assert not Deadline(60).expired()


def test_run_in_process_catches_errors_and_out_of_memory():
    def oom():
        raise torch.cuda.OutOfMemoryError('CUDA out of memory. Tried 2 GiB')

    result = run_in_process(oom)
    assert result == dict(
        error='out of memory', detail='CUDA out of memory. Tried 2 GiB'
    )
    assert status(result) == 'failed: out of memory'
    result = run_in_process(lambda: 1 / 0)
    assert status(result) == 'failed: ZeroDivisionError: division by zero'
    assert run_in_process(lambda x: dict(x=x), 3) == dict(x=3)


def grid_args(max_seconds=None):
    return argparse.Namespace(
        device='cpu', dtype='fp32', max_seconds=max_seconds, threads=1
    )


def test_grid_runs_cases_in_children_and_saves_as_it_goes(tmp_path, capsys):
    path = tmp_path / 'results.json'

    def measure(case):
        if case[1] == 'bad':
            raise ValueError('broken case')
        return dict(seconds=float(case[1]))

    cases = [('a', '1'), ('a', 'bad'), ('b', '2'), ('b', '3')]
    results = run_grid(
        cases,
        measure,
        grid_args(),
        str(path),
        describe=' '.join,
        summary=lambda r: f'{r["seconds"]} s',
        skip=lambda case: 'not this one' if case[1] == '3' else None,
    )
    assert results['a']['1'] == dict(seconds=1.0)
    assert status(results['a']['bad']) == 'failed: ValueError: broken case'
    assert results['b'] == {
        '2': dict(seconds=2.0),
        '3': dict(skipped='not this one'),
    }
    saved = json.loads(path.read_text())
    assert saved['results'] == results
    assert saved['config']['device'] == 'cpu'
    assert 'CPU, 1 threads, float32' == saved['device']
    out = capsys.readouterr().out
    assert 'a 1: 1.0 s' in out and 'b 3: skipped: not this one' in out


def test_grid_stops_starting_cases_after_max_seconds(tmp_path):
    results = run_grid(
        [('a',), ('b',)],
        lambda case: time.sleep(0.2) or dict(seconds=0.2),
        grid_args(max_seconds=0.1),
        str(tmp_path / 'r.json'),
        describe=str,
        summary=str,
    )
    assert 'seconds' in results['a']
    assert results['b'] == dict(skipped='--max-seconds 0.1 reached')


def test_compare_gives_speedup_flop_ratio_and_memory_ratio():
    ref = dict(seconds=2.0, flops=300, peak_mib=10.0)
    ratios = compare(dict(seconds=1.0, flops=100, peak_mib=20.0), ref)
    assert ratios == dict(
        speedup=2.0,
        flop_ratio=3.0,
        fraction_of_flop_ratio=pytest.approx(2 / 3),
        memory_ratio=2.0,
    )
    assert compare(dict(seconds=1.0), dict(peak_mib=1.0)) == {}


def test_markdown_table_and_verdict():
    lines = markdown_table(['a', 'b'], [[1, 'x']], '-:')
    assert lines == ['| a | b |', '|---|---:|', '| 1 | x |']
    assert markdown_table(['a'], [], '|:--|')[1] == '|:--|'
    assert verdict(True, 'case', 'fine') == 'met    case: fine'
    assert verdict(False, 'case', 'slow') == 'MISSED case: slow'


@no_cuda
def test_cuda_device_without_a_gpu_is_a_clear_error(capsys):
    parser = argparse.ArgumentParser()
    add_device_arguments(parser)
    with pytest.raises(SystemExit):
        check_device_arguments(parser, parser.parse_args(['--device', 'cuda']))
    err = capsys.readouterr().err
    assert '--device cuda' in err and 'CUDA' in err


def test_default_dtype_follows_the_device():
    parser = argparse.ArgumentParser()
    add_device_arguments(parser)
    args = check_device_arguments(parser, parser.parse_args([]))
    assert (args.device, args.dtype) == ('cpu', 'fp32')


@pytest.mark.cuda
def test_cuda_timing_and_peak_memory():
    a = torch.randn(2048, 2048, device='cuda')
    wall, _ = time_call(lambda: a @ a, 'cuda')
    assert 0 < wall < 1
    mib = cuda_peak_growth_mib(
        lambda: torch.empty(2**24, device='cuda')  # 64 MiB of fp32
    )
    assert 63 < mib < 66
    result = measure_step(lambda: a @ a, 3, 1.0, 'cuda')
    assert len(result['times']) == 3 and result['peak_mib'] >= 0
