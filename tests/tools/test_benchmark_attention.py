"""Smoke test of tools/analysis/benchmark_attention.py at tiny sizes (the
real benchmark is documented in docs/benchmarks.md, not run here)."""

import importlib.util
import json
import os
import os.path as osp
import subprocess
import sys

import pytest

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SCRIPT = osp.join(REPO, 'tools', 'analysis', 'benchmark_attention.py')


@pytest.fixture(scope='module')
def bench():
    spec = importlib.util.spec_from_file_location(
        'benchmark_attention', SCRIPT
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_peak_memory_sees_a_known_allocation():
    # 64 MiB written and freed inside the step, measured in a fresh process
    # set up as the benchmark sets up its memory worker (a long-lived test
    # process may serve the block from memory it already holds).
    script = (
        'import torch\n'
        'from lab.benchmarks import peak_resident_growth_mib\n'
        'step = lambda: torch.ones(16 * 2**20).sum()\n'
        'print(peak_resident_growth_mib(step))\n'
    )
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_='65536')
    out = subprocess.run(
        [sys.executable, '-c', script],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert 60 < float(out.stdout.strip().splitlines()[-1]) < 72


def test_linear_fit_error(bench):
    tokens = [197, 785, 3137, 12545]
    assert bench.linear_fit_error(tokens, [3 + 0.01 * n for n in tokens]) < (
        1e-9
    )
    quadratic = [3 + 1e-6 * n * n for n in tokens]
    assert bench.linear_fit_error(tokens, quadratic) > 0.1


def test_rejects_token_counts_without_a_square_grid(bench):
    with pytest.raises(SystemExit):
        bench.parse_args(['--tokens', '20'])


def test_tiny_run_writes_table_figures_and_plot(bench, tmp_path):
    operators = ['ELULinearAttention', 'GatedLinearAttention', 'TTTAttention']
    argv = [
        *('--operators', *operators, '--tokens', '17', '65'),
        *('--repeats', '1', '--threads', '1', '--gla-tokens', '96'),
        *(
            '--embed-dims',
            '32',
            '--num-heads',
            '2',
            '--out-dir',
            str(tmp_path),
        ),
    ]
    assert bench.main(argv) == 0
    table = (tmp_path / 'attention_benchmark.md').read_text()
    for name in ['SoftmaxAttention'] + operators:
        assert f'| {name} | ' in table
    assert '| TTTAttention | 64 |' in table  # no class token: 8 x 8 patches
    assert '| ELULinearAttention | 65 |' in table
    figures = json.loads((tmp_path / 'attention_benchmark.json').read_text())
    assert set(figures['seconds']) == {'SoftmaxAttention', *operators}
    assert figures['peak_mib']['TTTAttention']['65'] >= 0
    for name in operators:
        assert figures['flops'][name]['65'] > 0
    assert 'GLA causal scan, T=96' in table
    for scan in ('chunked', 'recurrent'):
        assert figures['gla_scan_seconds'][scan]['forward'] > 0
    png = (tmp_path / 'attention_benchmark.png').read_bytes()
    assert png.startswith(b'\x89PNG')


def test_default_operators_are_the_registered_linear_ones(bench):
    from mmlvit.models.attentions import registered_operators

    linear = [n for n, c in registered_operators().items() if c.linear_cost]
    assert bench.parse_args([]).operators == linear
    assert 'SoftmaxAttention' not in linear and 'TTTAttention' in linear


def test_unknown_operator_is_named(bench):
    with pytest.raises(SystemExit):
        bench.parse_args(['--operators', 'HedgehogAttention'])


def test_cuda_report_lists_first_calls_and_out_of_memory(bench, monkeypatch):
    args = bench.parse_args(
        ['--operators', 'ELULinearAttention', '--tokens', '197', '65537']
    )
    args.device, args.dtype = 'cuda', 'bf16'  # rendering needs no GPU
    figures = dict(
        seconds={'SoftmaxAttention': {197: 0.002, 65537: 0.4},
                 'ELULinearAttention': {197: 0.001}},
        first_call_seconds={'SoftmaxAttention': {197: 0.5, 65537: 0.6},
                            'ELULinearAttention': {197: 3.0}},
        flops={'SoftmaxAttention': {197: 400, 65537: 9000},
               'ELULinearAttention': {197: 100}},
        peak_mib={'SoftmaxAttention': {197: 10.0, 65537: 900.0},
                  'ELULinearAttention': {197: 5.0}},
        failed={'ELULinearAttention': {65537: 'failed: out of memory'}},
    )  # fmt: skip
    monkeypatch.setattr(bench, 'describe_device', lambda *a: 'NVIDIA H200')
    lines, missed = bench.render(args, figures, None)
    table = '\n'.join(lines)
    assert '| operator | N | time (ms) | first call (ms) | speed-up |' in table
    assert (
        '| ELULinearAttention | 197 | 1.0 | 3000.0 | 2.00 | 4.00 | 0.50 |'
        in (table)
    )
    assert '| ELULinearAttention | 65537 | failed: out of memory |' in table
    assert missed == []


@pytest.mark.cuda
def test_tiny_cuda_run(bench, tmp_path):
    argv = ['--operators', 'ReLULinearAttention', '--tokens', '17', '65']
    argv += ['--embed-dims', '32', '--num-heads', '2', '--repeats', '2']
    assert (
        bench.main(argv + ['--device', 'cuda', '--out-dir', str(tmp_path)])
        == 0
    )
    figures = json.loads((tmp_path / 'attention_benchmark.json').read_text())
    assert figures['peak_mib']['ReLULinearAttention']['65'] > 0
    assert figures['first_call_seconds']['SoftmaxAttention']['17'] > 0
