"""kernel_resources.py: the project's Triton kernels compiled for sm_90
without a GPU, their registers, spills and resident warps."""

import json

import pytest
import torch

from mmlvit.benchmark.kernel_resources import parse_usage, resident_warps

pytest.importorskip('triton')

USAGE = """
Resource usage:
 Common:
  GLOBAL:0
 Function output_kernel:
  REG:157 STACK:16 SHARED:1024 LOCAL:0 CONSTANT[0]:520 TEXTURE:0 SURFACE:0
"""


def test_parse_usage_reads_registers_stack_and_shared():
    assert parse_usage(USAGE) == (157, 16, 1024)
    with pytest.raises(ValueError, match='No resource usage'):
        parse_usage('cuobjdump: no cubin')


def test_resident_warps_follow_the_register_file():
    # 160 registers x 128 threads: 3 programs of 4 warps in 64 K.
    assert resident_warps(160, 4) == 12
    # Rounded up to 8 per thread: 157 counts as 160.
    assert resident_warps(157, 4) == 12
    assert resident_warps(255, 8) == 8
    assert resident_warps(32, 4) == 64  # capped at 64 warps


def test_resident_warps_follow_the_shared_memory():
    # 96 registers x 128 threads fit 5 programs; 60 KiB + 1 KiB of shared
    # memory each fit 3 in 228 KiB.
    assert resident_warps(96, 4) == 20
    assert resident_warps(96, 4, 60 * 1024) == 12
    assert resident_warps(96, 4, 44 * 1024) == 20  # 5 fit either way


def test_tool_compiles_the_depthwise_kernels(load_tool, tmp_path):
    """The depthwise-convolution kernels for fp16 tokens, shipped and at 4
    warps: sane figures, written as a table and JSON; at their shipped
    configuration they do not spill (their tap loops are not unrolled, so
    one tap's tile is live at a time)."""
    tool = load_tool('tools/analysis/kernel_resources.py')
    results = tool.main(
        ['--families', 'depthwise_conv', '--num-warps', '4']
        + ['--dtype', 'fp16', '--out-dir', str(tmp_path)]
    )
    cases = tool.FAMILIES['depthwise_conv'](torch.float16, 'fp16')
    assert cases[0].pointers['x_ptr'] == 'fp16'
    shipped = cases[0].num_warps
    assert {r['num_warps'] for r in results} == {4, shipped}
    assert len(results) == 8
    for row in results:
        assert 0 < row['registers'] <= 255, row
        assert row['spill_bytes'] >= 0 and row['resident_warps'] > 0, row
        assert row['shared_bytes'] >= 0, row
        if row['num_warps'] == shipped:
            assert row['spill_bytes'] == 0, row
    assert json.loads((tmp_path / 'results.json').read_text()) == results
    table = (tmp_path / 'table.md').read_text()
    assert 'resident warps' in table and 'fp16' in table
