"""profile_step.py on a tiny arch (CPU): every model's longest operators,
their shares of the step, and the rest summed; a model that fails is
listed and the others still run."""

import json

import pytest
import torch

from lab.benchmarks.profiling import self_times, short_name, top_rows


@pytest.fixture(scope='module')
def tool(load_tool):
    return load_tool('tools/analysis/profile_step.py')


def test_self_times_find_the_step_operators():
    a = torch.randn(64, 64)
    entries = self_times(lambda: (a @ a).relu().sum())
    names = [entry['name'] for entry in entries]
    assert 'aten::mm' in names and 'aten::relu' in names
    mm = entries[names.index('aten::mm')]
    assert mm['calls'] == 1 and mm['ms'] > 0
    assert [e['ms'] for e in entries] == sorted(
        (e['ms'] for e in entries), reverse=True
    )


def test_top_rows_share_the_total():
    entries = [
        dict(name=n, calls=c, ms=ms)
        for n, c, ms in [('a', 1, 6.0), ('b', 2, 3.0), ('c', 3, 1.0)]
    ]
    rows = top_rows(entries, 2)
    assert [r['name'] for r in rows] == ['a', 'b', '(1 others)']
    assert [r['share'] for r in rows] == pytest.approx([0.6, 0.3, 0.1])
    assert rows[-1]['calls'] == 3
    assert top_rows(entries, 5) == [
        dict(e, share=s) for e, s in zip(entries, (0.6, 0.3, 0.1))
    ]
    assert short_name('x' * 100, 10) == 'xxxxxxx...'
    assert short_name('a|b') == 'a/b'


@pytest.mark.usefixtures('one_thread')
def test_tiny_run_tables_every_model(tool, tmp_path, monkeypatch):
    broken = 'GatedLinearAttention'
    original = tool.model_step

    def model_step(name, args):
        if name == broken:
            raise RuntimeError('no kernel for this model')
        return original(name, args)

    monkeypatch.setattr(tool, 'model_step', model_step)
    results = tool.main(
        ['--operators', 'ReLULinearAttention', broken]
        + ['--arch', 'deit-tiny', '--resolution', '32', '--batch-size', '2']
        + ['--top', '3', '--out-dir', str(tmp_path)]
    )
    assert list(results) == ['softmax', 'ReLULinearAttention']
    for result in results.values():
        assert result['warm_up_s'] > 0
        assert sum(e['ms'] for e in result['entries']) > 0
    # The linear model's attention products are bmm / mm, the softmax
    # ViT's its fused attention operator.
    relu = {e['name'] for e in results['ReLULinearAttention']['entries']}
    softmax = {e['name'] for e in results['softmax']['entries']}
    assert 'aten::bmm' in relu
    assert any('scaled_dot_product' in n for n in softmax - relu)
    md = (tmp_path / 'profile.md').read_text()
    assert 'One forward+backward step at 32 px, batch 2, ViT-deit-tiny' in md
    assert '### ReLULinearAttention:' in md and '| aten::mm |' in md
    assert md.count('others) |') == 2  # top 3 and the rest, per model
    assert f'### {broken}: failed: RuntimeError: no kernel' in md
    saved = json.loads((tmp_path / 'profile.json').read_text())
    assert list(saved) == list(results)
