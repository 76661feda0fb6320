"""lab.benchmarks's tables, ratio rows, memory-growth summary, verdicts,
plot panels and the GLA scan table, from fake figures."""

from lab.benchmarks import (
    column_table,
    flop_ceiling_verdict,
    growth_lines,
    plots,
    ratio_rows,
)
from lab.benchmarks.gla_scan import gla_scan_lines
from lab.benchmarks.vit_models import block_operators


def test_ratio_rows_compare_each_leaf_with_its_group_reference():
    results = {'seg': {'64': {
        'softmax': dict(seconds=2.0, flops=8, peak_mib=10.0),
        'linear': dict(seconds=1.0, flops=2, peak_mib=5.0),
        'broken': dict(error='Traceback\nRuntimeError: boom'),
    }, '96': {'softmax': dict(skipped='--skip'),
              'linear': dict(seconds=1.0, flops=2)}}}  # fmt: skip
    rows = ratio_rows(results, ('model', 'px', 'backbone'), 'softmax',
                      lambda res: dict(seconds=res['seconds']))  # fmt: skip
    assert [r['status'] for r in rows] == [
        'ok', 'ok', 'failed: RuntimeError: boom', 'skipped: --skip', 'ok'
    ]  # fmt: skip
    linear = rows[1]
    assert list(linear)[:4] == ['model', 'px', 'backbone', 'status']
    assert linear['speedup'] == 2.0 and linear['flop_ratio'] == 4.0
    assert linear['fraction_of_flop_ratio'] == 0.5
    assert linear['memory_ratio'] == 0.5
    assert 'speedup' not in rows[4]  # its reference did not run


def test_column_table_formats_statuses_and_missing_values():
    columns = [
        ('name', 'name', '{}', '-'),
        ('time (ms)', 's', lambda s: f'{1e3 * s:.1f}'),
        ('speed-up', 'x', '{:.2f}x'),
    ]
    rows = [dict(name='a', status='ok', s=0.5, x=2.0),
            dict(name='b', status='ok', s=0.25),
            dict(name='c', status='failed: out of memory')]  # fmt: skip
    assert column_table(columns, rows, keys=1) == [
        '| name | time (ms) | speed-up |',
        '|---|---:|---:|',
        '| a | 500.0 | 2.00x |',
        '| b | 250.0 | - |',
        '| c | failed: out of memory |  |',
    ]


def test_growth_lines_flag_a_growth_far_from_linear():
    tokens = [197, 785, 3137, 12545]
    memory = {'softmax': {n: 1e-4 * n * n for n in tokens},
              'linear': {n: 0.01 * n for n in tokens},
              'quadratic': {n: 1e-4 * n * n for n in tokens}}  # fmt: skip
    lines, missed = growth_lines(memory, list(memory), 'softmax')
    assert lines[2].startswith('- softmax: ')
    assert lines[3] == (
        '- linear: 0.0% off a line, x4.00 from N=3137 to 12545 (tokens x4.00)'
    )
    assert [m.split(':')[0] for m in missed] == ['quadratic']


def test_flop_ceiling_verdict():
    row = dict(speedup=1.5, flop_ratio=2.0, fraction_of_flop_ratio=0.75)
    assert flop_ceiling_verdict('case', row, 0.7) == (
        'met    case: speed-up 1.50x, FLOP ratio 2.00, 75 % of it '
        '(target >= 70 %)'
    )
    assert flop_ceiling_verdict('case', row, 0.8).startswith('MISSED')
    assert flop_ceiling_verdict('case', dict(status='skipped: x'), 0.7) == (
        'n/a    case: skipped: x'
    )


def test_line_panels_writes_a_png(tmp_path):
    panels = [
        dict(series={'a': [(64, 1.0), (32, 0.5)], 'b': []}, sizes=[32, 64],
             title='t', xlabel='px', ybase=2, hlines=[(1.0, {})]),
        dict(series={'a': [(17, 2.0), (65, 3.0)]}, xlabel='N', legend=False),
    ]  # fmt: skip
    path = tmp_path / 'plot.png'
    plots.line_panels(str(path), panels, columns=2, title='figure')
    assert path.read_bytes().startswith(b'\x89PNG')


def test_gla_scan_lines_and_target():
    seconds = dict(
        chunked=dict(forward=0.01, forward_backward=0.03),
        recurrent=dict(forward=0.5, forward_backward=0.3),
    )
    lines, missed = gla_scan_lines(seconds, 12, 64, 3137)
    assert lines[0] == 'GLA causal scan, T=3137, 12 heads of 64:'
    assert lines[-1] == '| forward + backward | 30.0 | 300.0 | 10.0 |'
    assert missed == [
        'GLA chunked scan (forward + backward) only 10.0x faster than the '
        'recurrence (target 20x)'
    ]


def test_hybrid_block_operators():
    assert block_operators('softmax', 3) == ['SoftmaxAttention'] * 3
    assert block_operators('A+1softmax', 3) == ['A', 'A', 'SoftmaxAttention']
    assert block_operators('A', 2) == ['A', 'A']
