"""benchmark_distill.py: the CUDA table and the --device check (the CPU
run builds two DeiT-S models; docs/benchmarks.md documents it)."""

import pytest


@pytest.fixture(scope='module')
def bench(load_tool):
    return load_tool('tools/analysis/benchmark_distill.py')


def test_cuda_table(bench, monkeypatch):
    args = bench.parse_args(['--batch-size', '64'])
    args.device, args.dtype = 'cuda', 'bf16'  # rendering needs no GPU
    monkeypatch.setattr(bench, 'describe_device', lambda *a: 'NVIDIA H200')
    times = dict(
        student=(0.100, 0.01, 20.0),
        distilled=(0.125, 0.01, 25.0),
        teacher=(0.020, 0.01, 2.0),
    )
    memory = dict(student=1000.0, distilled=1100.0)
    lines = bench.render(args, 'GatedLinearAttention', times, memory)
    assert lines[0].startswith('DeiT-S GatedLinearAttention student')
    assert 'NVIDIA H200' in lines[0]
    assert lines[2:] == [
        '| step | time (ms) | first call (s) | peak memory growth (MiB) |',
        '|---|---:|---:|---:|',
        '| student alone | 100.0 | 20.00 | 1000 |',
        '| distilled | 125.0 | 25.00 | 1100 |',
        '| ratio | 1.25x | | 1.10x |',
        '| teacher forward alone (no grad) | 20.0 | 2.00 |  |',
        '',
        'Time ratio (target <= 1.4x): 1.25x met.',
    ]


@pytest.mark.cuda
def test_cuda_run(bench, capsys):
    argv = ['--device', 'cuda', '--batch-size', '2', '--repeats', '1']
    assert bench.main(argv + ['--operator', 'ReLULinearAttention']) == 0
    assert '| distilled |' in capsys.readouterr().out
