"""benchmark_model.py on a tiny arch: hybrid models (last K blocks softmax)
are built, measured and tabled next to the softmax reference."""

import pytest

from lab.benchmarks.vit_models import build_model
from mmlvit.models.attentions import SoftmaxAttention


@pytest.fixture(scope='module')
def bench(load_tool):
    return load_tool('tools/analysis/benchmark_model.py')


def test_hybrid_keeps_its_last_blocks_softmax():
    model = build_model('ReLULinearAttention+2softmax', 'deit-tiny', 32)
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


@pytest.mark.parametrize(
    'name, px, ceiling',
    [('ReLULinearAttention', 1792, 3.65), ('GatedLinearAttention', 1792, 3.26),
     ('TTTAttention', 1792, 3.46), ('ReLULinearAttention', 896, 1.65)],
)  # fmt: skip
def test_flop_ratio_is_the_documented_ceiling(bench, name, px, ceiling):
    # docs/benchmarks.md, "Whole models": softmax ViT-B 35 GFLOP at 224 px
    # and the forward FLOP ratios softmax / linear.
    assert bench.forward_flops('softmax', 'b', 224) / 1e9 == pytest.approx(
        35, abs=0.5
    )
    ratio = bench.forward_flops('softmax', 'b', px) / bench.forward_flops(
        name, 'b', px
    )
    assert ratio == pytest.approx(ceiling, abs=0.006)


def test_cuda_table_shows_flop_ratio_first_call_and_failures(bench):
    ok = dict(
        images_per_s=100.0,
        speedup=2.0,
        peak_mib=50.0,
        memory_ratio=0.5,
        runs=3,
        first_call_s=1.5,
        flop_ratio=2.5,
    )
    rows = [
        dict(model='softmax', size=2048, batch=2, forward=ok),
        dict(model='GLA', size=2048, batch=2, forward=ok,
             status={'forward+backward': 'failed: out of memory'},
             **{'forward+backward': None}),
    ]  # fmt: skip
    lines = bench.table(rows, 'cuda').splitlines()
    assert lines[0].startswith('| model | px | batch | fwd img/s | ')
    assert '| fwd FLOP ratio |' in lines[0]
    assert '| fwd first call s |' in lines[0]
    assert lines[2] == (
        '| softmax | 2048 | 2 | 100 | 2.00x | 2.50 | 50 | 0.50 | 1.50 | '
        '- | - | - | - | - | - |'
    )
    assert lines[3].endswith('| failed: out of memory |  |  |  |  |  |')
    cpu = bench.table(rows, 'cpu').splitlines()
    assert cpu[0].count('|') == 11 and 'batch' not in cpu[0]


def test_batch_sizes_one_per_resolution(bench):
    args = bench.parse_args(
        ['--resolutions', '224', '512', '--batch-sizes', '128', '32']
    )
    assert [bench.batch_size(args, px) for px in (224, 512)] == [128, 32]
    assert args.references == ['softmax'] and args.dtype == 'fp32'
    with pytest.raises(SystemExit):
        bench.parse_args(['--resolutions', '224', '--batch-sizes', '1', '2'])


@pytest.mark.cuda
def test_tiny_cuda_run(bench, tmp_path):
    rows = bench.main(
        ['--operators', 'ReLULinearAttention', '--arch', 'deit-tiny']
        + ['--resolutions', '64', '--batch-sizes', '4', '--repeats', '2']
        + ['--device', 'cuda', '--out-dir', str(tmp_path)]
    )
    assert [row['model'] for row in rows][-1] == 'ReLULinearAttention'
    assert all(row['forward+backward']['first_call_s'] > 0 for row in rows)
