"""The bytes a training step moves, counted op by op
(lab.benchmarks.op_traffic), against counts worked out by hand, and
tools/analysis/step_traffic.py end to end on a tiny arch (in a
subprocess: it runs the fused kernels under Triton's interpreter)."""

import json
import sys
from pathlib import Path

import pytest
import torch
from tool_runs import interpreter_env, run_ok
from torch import nn

from lab.benchmarks import op_traffic, tensor_memory

HERE = Path(__file__).parent
FLOAT = 4
TILE = 64 * 32 * FLOAT  # bytes of one (64, 32) fp32 tensor


def test_ops_count_what_they_read_and_write():
    """x * 2 reads x and writes a tensor; a view and an allocation move
    nothing; an in-place add reads both tensors and writes one."""
    x, y = torch.randn(64, 32), torch.randn(64, 32)
    with op_traffic.counting_traffic() as counter:
        a = x * 2
        a.view(32, 64).t()
        torch.ops.aten._unsafe_view(a, (32, 64))
        torch.empty(1000, 1000)
        counter.phase = 'backward'
        a.add_(y)
    assert dict(counter.bytes) == {
        ('forward', 'aten::mul'): 2 * TILE,
        ('backward', 'aten::add_'): 3 * TILE,
    }


def test_totals_and_largest_sort_ops_from_kernels():
    figures = {
        ('forward', 'aten::mul'): 1.0,
        ('backward', 'aten::mm'): 4.0,
        ('backward', 'triton::state_kernel'): 2.0,
    }
    assert op_traffic.totals(figures) == dict(
        forward=1.0, backward=4.0, kernels=2.0, total=7.0
    )
    assert op_traffic.largest(figures, 2) == [
        ('backward', 'aten::mm', 4.0),
        ('backward', 'triton::state_kernel', 2.0),
    ]


class Chain(nn.Module):
    """``blocks`` steps of x -> 2x on a (batch, 64, 32) input: each moves
    two tensors forward and two backward (mul's gradient is a mul)."""

    def __init__(self, blocks):
        super().__init__()
        self.blocks = blocks
        self.scale = nn.Parameter(torch.ones(()))  # something to train

    def forward(self, images):
        x = images.new_ones(images.shape[0], 64, 32) * self.scale
        for _ in range(self.blocks):
            x = x * 2
        return x


def test_step_traffic_solves_per_image_and_block():
    solved = tensor_memory.per_image_figures(
        Chain, 1, None, measure=op_traffic.step_traffic_mib
    )
    block = {key: f['per_block'] for key, f in solved.items()}
    mib = tensor_memory.MIB
    assert block['forward', 'aten::mul'] * mib == pytest.approx(2 * TILE)
    assert block['backward', 'aten::mul'] * mib == pytest.approx(2 * TILE)


def test_a_launch_counts_the_distinct_bytes_it_moves():
    """A probe kernel under Triton's interpreter (in a fresh process):
    loads repeated within and across its programs count once, masked-out
    elements not at all (tests/benchmark/launch_bytes_interpreter.py)."""
    out = run_ok(
        [sys.executable, 'launch_bytes_interpreter.py'],
        cwd=HERE,
        env=interpreter_env(),
        timeout=300,
    )
    counted = json.loads(out.stdout.strip().splitlines()[-1])
    assert counted == {'triton::probe_kernel': 40 * 4 + 40 * 2}


@pytest.mark.parametrize('heads, tiles', [(12, 7), (12, 64), (16, 1024)])
@pytest.mark.parametrize('batch_size', [2, 8, 128])
def test_token_splits_as_at_a_batch(heads, tiles, batch_size):
    """One and two images split a reduction's tokens as ``batch_size``
    would, not as far as their few programs would on their own."""
    from mmlvit.ops.common import linear_launch as function

    at_batch = function.token_splits(tiles, batch_size * heads)
    for images in (1, 2):
        alone = function.token_splits(tiles, images * heads)
        with op_traffic.token_splits_as_at(batch_size, images):
            assert function.token_splits(tiles, images * heads) == at_batch
        assert function.token_splits(tiles, images * heads) == alone
    assert alone != at_batch or batch_size == 2 or tiles == 1


def test_tool_tables_fused_gla_on_a_tiny_arch(tmp_path):
    """deit-tiny at 32 px: GLA's gates, norm and output gate run in its
    fused kernels, so none of their PyTorch ops moves a byte."""
    run_ok(
        [sys.executable, 'tools/analysis/step_traffic.py']
        + ['--operators', 'ReLULinearAttention', 'GatedLinearAttention']
        + ['--arch', 'deit-tiny', '--resolutions', '32', '--top', '50']
        + ['--out-dir', str(tmp_path)],
        cwd='.',
        timeout=300,
    )
    results = json.loads((tmp_path / 'results.json').read_text())
    assert set(results) == {
        'softmax',
        'ReLULinearAttention',
        'GatedLinearAttention',
    }
    for name, by_size in results.items():
        f = by_size['32']
        assert f['per_block']['forward'] > 0, name
        assert f['per_block']['backward'] > f['per_block']['forward'], name
        assert (f['per_block']['kernels'] > 0) == (name != 'softmax'), name
    gla = results['GatedLinearAttention']['32']
    ops = {op for _, op, _ in gla['largest']}
    assert {'triton::log_gate_kernel', 'triton::gated_norm_kernel'} <= ops
    unfused = {'log_sigmoid_forward', 'rsqrt', 'silu', 'silu_backward'}
    assert not ops & {f'aten::{name}' for name in unfused}, ops
    table = (tmp_path / 'table.md').read_text()
    assert '| softmax | SDPA | 32 |' in table
    assert '| 1.00x |' in table
