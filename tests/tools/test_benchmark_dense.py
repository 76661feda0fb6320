"""benchmark_dense.py on tiny backbones (4 blocks of width 32) and small
images: both dense models run in both modes, the table's ratios follow from
the measured times and FLOPs, and the FLOP counter counts softmax attention
(SDPA) as the analytic 4 N^2 C."""

import json

import pytest
import torch
import torch.nn.functional as F

from lab.benchmarks import count_flops
from mmlvit.models.attentions import SoftmaxAttention

pytest.importorskip('mmseg')
pytest.importorskip('mmdet')

TINY_ARCH = dict(
    _delete_=True,
    embed_dims=32,
    num_layers=4,
    num_heads=2,
    feedforward_channels=64,
)
TINY = {
    'upernet': {
        'model.backbone.arch': TINY_ARCH,
        'model.backbone.out_indices': (0, 1, 2, 3),
        'model.neck.in_channels': [32] * 4,
        'model.neck.out_channels': 32,
        'model.decode_head.in_channels': [32] * 4,
        'model.decode_head.channels': 32,
        'model.auxiliary_head.in_channels': 32,
        'model.auxiliary_head.channels': 16,
    },
    'mask-rcnn': {
        'model.backbone.arch': TINY_ARCH,
        'model.neck.in_channels': 32,
        'model.train_cfg.rpn_proposal.max_per_img': 50,
        'model.train_cfg.rcnn.sampler.num': 16,
        'model.test_cfg.rpn.max_per_img': 50,
        'model.test_cfg.rcnn.max_per_img': 5,
    },
}


@pytest.fixture(scope='module')
def bench(load_tool):
    return load_tool('tools/analysis/benchmark_dense.py')


def test_sdpa_flops_are_the_analytic_count(bench):
    N, C, heads = 197, 768, 12
    q, k, v = torch.randn(3, 1, heads, N, C // heads).unbind(0)
    flops = count_flops(lambda: F.scaled_dot_product_attention(q, k, v))
    assert flops == 4 * N * N * C  # q k^T and A v, 2 per multiply-add

    attn = SoftmaxAttention(embed_dims=64, num_heads=4)
    x = torch.randn(1, 50, 64)
    with torch.no_grad():
        flops = count_flops(lambda: attn(x, (7, 7)))
    assert (
        flops
        == attn.flops(50, (7, 7))
        == attn.projection_flops(50) + (4 * 50 * 50 * 64)
    )


@pytest.mark.parametrize(
    'operator', ['ReLULinearAttention', 'GatedLinearAttention']
)
def test_linear_model_has_fewer_flops_at_many_tokens(bench, operator):
    def flops(op):
        model = bench.build_dense_model('upernet', op, TINY['upernet'])
        step = bench.model_step(model, 'upernet', 'inference', 512)
        return count_flops(step)

    # 1025 tokens of width 32: softmax's 4 N^2 C is 16x its 8 N C^2
    # projections.
    assert flops(operator) < 0.9 * flops(bench.SOFTMAX)


def test_tiny_grid_writes_consistent_ratios(bench, tmp_path):
    rows = bench.main(
        ['--operators', 'ReLULinearAttention']
        + ['--train-resolutions', '64', '--infer-resolutions', '64', '96']
        + ['--skip', 'upernet:inference:96', 'mask-rcnn:inference:96']
        + ['--repeats', '2', '--budget-s', '5', '--out-dir', str(tmp_path)],
        cfg_options=TINY,
    )
    saved = json.loads((tmp_path / 'results.json').read_text())
    assert saved['rows'] == rows
    assert saved['config']['operators'] == ['ReLULinearAttention']
    cases = {(r['model'], r['mode'], r['px'], r['backbone']) for r in rows}
    assert len(cases) == len(rows) == 2 * 3 * 2
    skipped = [r for r in rows if r['px'] == 96]
    assert len(skipped) == 4
    assert all(r['status'] == 'skipped: --skip' for r in skipped)

    done = [r for r in rows if r['px'] == 64]
    assert all(r['status'] == 'ok' for r in done), done
    for row in done:
        res = saved['results'][row['model']][row['mode']]['64']
        ref = res[bench.SOFTMAX]
        own = res[row['backbone']]
        assert 1 <= row['runs'] == len(own['times']) <= 2
        assert row['seconds'] == min(own['times']) > 0
        assert row['gflop'] == own['flops'] / 1e9 > 0
        assert row['peak_mib'] == own['peak_mib']
        assert row['speedup'] == pytest.approx(ref['seconds'] / row['seconds'])
        assert row['flop_ratio'] == pytest.approx(ref['flops'] / own['flops'])
        assert row['fraction_of_flop_ratio'] == pytest.approx(
            row['speedup'] / row['flop_ratio']
        )
        assert row['memory_ratio'] == pytest.approx(
            own['peak_mib'] / ref['peak_mib']
        )
    # Training counts the backward too: more FLOPs than inference.
    for name in bench.DENSE_MODELS:
        flops = {
            r['mode']: r['gflop']
            for r in done
            if r['model'] == name and r['backbone'] == bench.SOFTMAX
        }
        assert flops['train'] > flops['inference']

    table = (tmp_path / 'table.md').read_text()
    assert '| upernet | inference | 96 | SoftmaxAttention | skipped' in table
    assert (tmp_path / 'benchmark_dense.png').stat().st_size > 0


def test_verdict_compares_speedup_with_flop_ratio(bench):
    row = dict(model='upernet', mode='inference', px=bench.TARGET_PX)
    rows = [
        dict(row, backbone='A', speedup=1.5, flop_ratio=2.0, status='ok'),
        dict(row, backbone='B', speedup=1.3, flop_ratio=2.0, status='ok'),
        dict(row, backbone='C', status='skipped: --skip'),
    ]
    for r in rows[:2]:
        r['fraction_of_flop_ratio'] = r['speedup'] / r['flop_ratio']
    verdicts = bench.target_verdicts(rows)
    assert verdicts[0].startswith('met ') and '75 %' in verdicts[0]
    assert verdicts[1].startswith('MISSED') and '65 %' in verdicts[1]
    assert verdicts[2].startswith('n/a') and 'skipped' in verdicts[2]
