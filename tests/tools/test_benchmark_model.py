"""benchmark_model.py on a tiny arch: hybrid models (last K blocks softmax)
are built, measured and tabled next to the softmax reference."""

import pytest

from mmlvit.models.attentions import SoftmaxAttention


@pytest.fixture(scope='module')
def bench(load_tool):
    return load_tool('tools/analysis/benchmark_model.py')


def test_hybrid_keeps_its_last_blocks_softmax(bench):
    model = bench.build_model('ReLULinearAttention+2softmax', 'deit-tiny', 32)
    kinds = [type(layer.attn).__name__ for layer in model.layers]
    assert kinds == ['ReLULinearAttention'] * 10 + ['SoftmaxAttention'] * 2
    assert isinstance(model.layers[-1].attn, SoftmaxAttention)


def test_tiny_hybrid_run_writes_its_rows(bench, tmp_path):
    rows = bench.main(
        ['--operators', 'ReLULinearAttention', '--keep-softmax', '1']
        + ['--arch', 'deit-tiny', '--resolutions', '32', '--modes', 'forward']
        + ['--repeats', '1', '--threads', '1', '--out-dir', str(tmp_path)]
    )
    models = [row['model'] for row in rows]
    assert models == [
        'softmax',
        'ReLULinearAttention',
        'ReLULinearAttention+1softmax',
    ]
    assert all(row['forward']['images_per_s'] > 0 for row in rows)
    assert all('forward+backward' not in row for row in rows)
    table = (tmp_path / 'table.md').read_text()
    assert '| ReLULinearAttention+1softmax | 32 |' in table
    assert '| - | - | - | - |' in table
