"""kernel_resources.py: the project's Triton kernels compiled for sm_90
without a GPU, their registers, spills and resident warps."""

import json
import os

import pytest
import torch

from lab.benchmarks import DTYPES, kernel_cases
from lab.benchmarks.kernel_resources import (
    KernelCase,
    kernel_resources,
    parse_usage,
    resident_warps,
    sass_loops,
)

pytest.importorskip('triton')

# Head width of every ViT here, and the widest the fused kernels take.
HEAD_WIDTH = 64


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


SASS = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   MUFU.EX2 R2, R2 ;
        /*0020*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0030*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
        /*0040*/               @P2 SHFL.BFLY PT, R7, R6, 0x2, 0x1f ;
        /*0050*/                   STL [R1+0x8], R3 ;
        /*0060*/              @!P0 BRA 0x30 ;
        /*0070*/                   LDL R3, [R1+0x8] ;
        /*0080*/               @P1 BRA 0x10 ;
        /*0090*/                   BRA 0xa0 ;
        /*00a0*/                   EXIT ;
        /*00b0*/                   BRA 0xb0;
"""


def test_sass_loops_count_each_body():
    """Two nested loops (back-branches to 0x30 and 0x10); the forward
    branch and the final branch to itself are no loops."""
    inner, outer = sass_loops(SASS)
    assert (inner['start'], inner['end']) == ('0x30', '0x60')
    assert inner == dict(
        inner, instructions=4, mma=1, shuffles=1, spill_accesses=1
    )
    assert inner['barriers'] == inner['special'] == 0
    assert (outer['start'], outer['end']) == ('0x10', '0x80')
    assert outer['instructions'] == 8 and outer['spill_accesses'] == 2
    assert outer['barriers'] == outer['special'] == 1
    assert sass_loops('no code') == []


def test_cases_are_specialised_as_a_launch_would_be():
    """Pointers 16-byte aligned, the integers the kernel specialises on
    multiples of 16, those it does not left alone, strides of 1 constants
    (Triton's launch on ViT-B's tensors)."""
    from mmlvit.ops.common import depthwise_kernels as kernels

    fn = kernels.conv_kernel
    case = KernelCase(
        'conv', fn, {f'{n}_ptr': 'bf16' for n in 'xywb'},
        dict(PER_IMAGE=False, HAS_BIAS=False, FLIP=False, KS=3, BLOCK_N=32,
             BLOCK_C=64),
        8, ones=('sxc', 'syc'),
    )  # fmt: skip
    assert case.constants()['sxc'] == case.constants()['syc'] == 1
    assert case.signature()['sxc'] == 'constexpr'
    index = {name: i for i, name in enumerate(fn.arg_names)}
    specialised = {fn.arg_names[i] for (i,) in case.attributes()}
    assert {'x_ptr', 'y_ptr', 'sxb', 'sxy', 'syx', 'C'} <= specialised
    assert not specialised & {'grid_h', 'grid_w', 'N', 'sxc', 'KS'}
    assert case.attributes()[(index['x_ptr'],)] == [['tt.divisibility', 16]]


def test_each_compile_is_timed_from_an_empty_cache(monkeypatch, tmp_path):
    """Every compile runs with a Triton cache of its own, empty when it
    starts (a first launch's compile, though the same kernel compiled
    before), and the caller's cache setting is back afterwards."""
    import triton

    from mmlvit.ops.common import depthwise_kernels as kernels

    monkeypatch.setenv('TRITON_CACHE_DIR', str(tmp_path / 'mine'))
    compile_, seen = triton.compile, []

    def recording(*args, **kwargs):
        cache = triton.knobs.cache.dir
        seen.append((cache, os.path.isdir(cache) and os.listdir(cache)))
        return compile_(*args, **kwargs)

    monkeypatch.setattr(triton, 'compile', recording)
    case = KernelCase(
        'conv', kernels.conv_kernel, {f'{n}_ptr': 'bf16' for n in 'xywb'},
        dict(PER_IMAGE=False, HAS_BIAS=False, FLIP=False, KS=3, BLOCK_N=32,
             BLOCK_C=64),
        8, ones=('sxc', 'syc'),
    )  # fmt: skip
    used = [kernel_resources(case)['compile_s'] for _ in range(2)]
    assert all(seconds > 0 for seconds in used)
    assert seen[0][0] != seen[1][0]
    for cache, entries in seen:
        assert cache != str(tmp_path / 'mine') and not entries
    assert os.environ['TRITON_CACHE_DIR'] == str(tmp_path / 'mine')


def test_every_kernel_moves_its_tokens_in_vectors(load_tool):
    """Compiled as its launch specialises it for ViT-B (head width 64), no
    kernel loads or stores bf16 tokens one element at a time: head widths
    and channel counts are specialised on, so the channel masks are known
    constant over 16 channels and tiles move in vectors of 16 bytes (with
    them unknown, the fused linear, TTT and depthwise kernels moved every
    element on its own, their loops without copies ahead)."""
    tool = load_tool('tools/analysis/kernel_resources.py')
    narrow, checked = {}, 0
    for cases in tool.FAMILIES.values():
        for case in cases(torch.bfloat16, 'bf16', HEAD_WIDTH):
            used = kernel_resources(case, loops=True)
            checked += 1
            if used['narrow_accesses']:
                narrow[case.name] = used['narrow_accesses']
    assert checked == 31 and not narrow, narrow


def test_loops_at_one_stage_run_fewer_instructions(load_tool):
    """The kernels whose loops copy nothing ahead in ViT-B's grids (224 px,
    batch 128; mmlvit.ops.common.triton_runtime.num_stages) run fewer
    instructions a loop iteration and in all than at Triton's default of
    three stages, with at least as many resident warps (sm_90, bf16)."""
    import dataclasses

    tool = load_tool('tools/analysis/kernel_resources.py')
    compared = []
    for cases in tool.FAMILIES.values():
        for case in cases(torch.bfloat16, 'bf16', HEAD_WIDTH):
            if case.options.get('num_stages') != 1 or 'bigla' in case.name:
                continue  # (the sub-block kernels always take one)
            three = dataclasses.replace(
                case, options=dict(case.options, num_stages=3)
            )
            one, three = (
                kernel_resources(c, loops=True) for c in (case, three)
            )
            assert one['instructions'] < three['instructions'], case.name
            assert (
                one['loops'][-1]['instructions']
                < (three['loops'][-1]['instructions'])
            ), case.name
            assert one['resident_warps'] >= three['resident_warps']
            compared.append(case.name.split('.')[-1])
    assert sorted(compared) == [
        'attention_kernel', 'chunk_states_kernel', 'output_kernel',
        'output_kernel', 'state_kernel', 'step_sums_kernel',
    ]  # fmt: skip


def test_gla_kernels_at_four_warps():
    """GLA's whole-chunk kernels and its log-gate gradient launch 4 warps
    on sm_90: fewer instructions a program than at 8 and two programs a
    multiprocessor, not one (bf16); 8 on sm_80, where ptxas spills more at
    4 (the whole-chunk kernels) or holds more programs at 8 (the
    log-gate gradient, at 80 registers). The gate features' gradient
    launches 4 everywhere: four programs, not two."""
    import dataclasses

    shipped, programs = {}, {}
    for arch in (80, 90):
        for case in kernel_cases.gla_cases(
            torch.bfloat16, 'bf16', HEAD_WIDTH, arch
        ):
            name = case.name
            if not ('whole' in name or 'grad_kernel' in name):
                continue
            if 'bigla' in name or 'carry' in name:
                continue
            shipped[arch, name] = case.num_warps
            if arch != 90:
                continue
            eight = dataclasses.replace(case, num_warps=8)
            four, eight = (
                kernel_resources(c, loops=True) for c in (case, eight)
            )
            assert case.num_warps == 4, name
            assert 4 * four['instructions'] < 8 * eight['instructions'], name
            programs[name] = (
                four['resident_warps'] // 4,
                eight['resident_warps'] // 8,
            )
    features = 'gla.gate_features_grad_kernel'
    assert programs.pop(features) == (4, 2)
    assert set(programs.values()) == {(2, 1)} and len(programs) == 6
    assert shipped.pop((80, features)) == 4
    assert {w for (arch, _), w in shipped.items() if arch == 80} == {8}


def test_gate_gradients_multiply_on_tensor_cores():
    """On sm_90 GLA's log-gate and gate-feature gradients multiply as three
    tf32 products: on tensor cores, in fewer instructions a program and
    no more registers than as fp32 multiply-adds ('ieee', no tensor
    cores), which the forward kernels keep; on sm_80 the log-gate
    gradient multiplies as fp32 multiply-adds (bf16)."""
    import dataclasses

    def cases(arch):
        found = kernel_cases.gla_cases(
            torch.bfloat16, 'bf16', HEAD_WIDTH, arch
        )
        return {case.name: case for case in found}

    grads = (
        'gla.log_gate_grad_kernel (forward gates)',
        'gla.gate_features_grad_kernel',
    )
    forward = ('gla.log_gate_kernel', 'gla.gate_features_kernel')
    sm90 = cases(90)
    for name in forward:
        used = kernel_resources(sm90[name], loops=True)
        assert used['opcodes']['mma'] == 0, name
    for name in grads:
        case = sm90[name]
        assert case.constexprs['PRECISION'] == 'tf32x3', name
        ieee = dataclasses.replace(
            case, constexprs=dict(case.constexprs, PRECISION='ieee')
        )
        three, ieee = (kernel_resources(c, loops=True) for c in (case, ieee))
        assert ieee['opcodes']['mma'] == 0 < three['opcodes']['mma']
        assert three['instructions'] < ieee['instructions'], name
        assert three['registers'] <= ieee['registers'], name
    sm80 = cases(80)
    assert sm80[grads[0]].constexprs['PRECISION'] == 'ieee'
    assert sm80[grads[1]].constexprs['PRECISION'] == 'tf32x3'


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


def test_resident_warps_are_none_over_a_programs_shared_memory():
    """A program over the shared memory it may have cannot launch (sm_90:
    227 KiB, sm_80: 163 KiB): 0 resident warps, whatever the registers."""
    assert resident_warps(96, 8, 227 * 1024) == 8
    assert resident_warps(96, 8, 227 * 1024 + 1) == 0
    assert resident_warps(96, 8, 163 * 1024, arch=80) == 8
    assert resident_warps(96, 8, 163 * 1024 + 1, arch=80) == 0


def _holds_matrices(family, case):
    """The kernels nearest the shared-memory limit: those that hold d x d
    matrices (TTT's) or whole chunks across their loops (the gradients)."""
    return family == 'ttt' or 'grad' in case.name or 'bwd' in case.name


@pytest.mark.parametrize(
    'arch, dtypes',
    [(80, ('fp32', 'fp16')), (90, ('fp32', 'fp16')), (89, ('bf16',))],
)
def test_every_kernel_fits_a_programs_shared_memory(load_tool, arch, dtypes):
    """At the widest head the dispatch sends to the kernels, each launches
    on an A100 (sm_80) and an H100 (sm_90) in fp32 and fp16, and on an
    L40S (sm_89, 99 KiB a program) in bf16, the only dtype the dispatch
    gives it. bf16 needs no check of its own on the first two: the same
    code multiplies 2-byte operands where fp16 multiplies 4-byte (tf32)
    ones. TTT's gradient kernels in fp32 used to need 321 KiB on sm_90
    (and 192 KiB on sm_80), before they reloaded their d x d matrices per
    tile; in fp16 the key-value gradient needed 164 KiB on sm_80 while it
    loaded two token tiles ahead."""
    from mmlvit.ops.common.dispatch import MAX_HEAD_DIMS
    from mmlvit.ops.gla.triton_function import MAX_HEAD_DIM

    assert MAX_HEAD_DIMS == MAX_HEAD_DIM == HEAD_WIDTH
    tool = load_tool('tools/analysis/kernel_resources.py')
    over, checked = [], 0
    for dtype in dtypes:
        for family, cases in tool.FAMILIES.items():
            for case in cases(DTYPES[dtype], dtype, HEAD_WIDTH, arch):
                if not _holds_matrices(family, case):
                    continue
                used = kernel_resources(case, arch)
                checked += 1
                if used['resident_warps'] == 0:
                    over.append((dtype, case.name, used['shared_bytes']))
    assert checked == len(dtypes) * 20 and not over, over


def test_ttt_gradients_keep_their_registers_on_sm80():
    """ptxas's default optimisation gives up on TTT's gradient kernels
    with fp32 inputs for sm_80 (32 registers a thread, the rest in local
    memory): launched with the options the launch code gives an A100, each
    keeps more than 64 registers, in fp32 and bf16. Neither kernel falls
    back on sm_90, whose launches keep ptxas's default."""
    from mmlvit.ops.ttt.swiglu_function import SM80_PTXAS_OPTIONS

    checked = []
    for dtype in ('bf16', 'fp32'):
        for arch in (80, 90):
            for case in kernel_cases.ttt_cases(
                DTYPES[dtype], dtype, HEAD_WIDTH, arch
            ):
                if not case.name.endswith(
                    ('query_grad_kernel', 'value_grad_kernel')
                ):
                    continue
                used = kernel_resources(case, arch)
                assert used['registers'] > 64, (dtype, arch, case.name, used)
                checked.append(case.options.get('ptx_options'))
    # (query, key-value) gradients: bf16 on sm_80, sm_90; fp32 alike.
    low = SM80_PTXAS_OPTIONS
    assert checked == [None, None, None, None, low, low, None, None]


def test_ttt_query_gradient_at_four_warps_with_half_tokens():
    """On sm_90 with bf16 or fp16 tokens TTT's query gradient launches 4
    warps: two programs a multiprocessor, not one, and fewer warp
    instructions a program than at 8; with fp32 tokens, and on sm_80, 8."""
    import dataclasses

    warps = {}
    for arch, dtype in (
        (90, 'bf16'),
        (90, 'fp16'),
        (90, 'fp32'),
        (80, 'bf16'),
    ):
        (case,) = (
            case
            for case in kernel_cases.ttt_cases(
                DTYPES[dtype], dtype, HEAD_WIDTH, arch
            )
            if case.name.endswith('query_grad_kernel')
        )
        warps[arch, dtype] = case.num_warps
        if case.num_warps == 4:
            eight = dataclasses.replace(case, num_warps=8)
            four, eight = (
                kernel_resources(c, loops=True) for c in (case, eight)
            )
            assert four['resident_warps'] // 4 == 2, dtype
            assert eight['resident_warps'] // 8 == 1, dtype
            assert 4 * four['instructions'] < 8 * eight['instructions']
    assert warps == {
        (90, 'bf16'): 4, (90, 'fp16'): 4, (90, 'fp32'): 8, (80, 'bf16'): 8,
    }  # fmt: skip


def test_tool_compiles_the_depthwise_kernels(load_tool, tmp_path):
    """The depthwise-convolution kernels for fp16 tokens, shipped and at 4
    warps: sane figures, written as a table and JSON; at their shipped
    configuration they do not spill."""
    tool = load_tool('tools/analysis/kernel_resources.py')
    results = tool.main(
        ['--families', 'depthwise_conv', '--num-warps', '4', '--loops']
        + ['--dtype', 'fp16', '--out-dir', str(tmp_path)]
    )
    cases = tool.FAMILIES['depthwise_conv'](torch.float16, 'fp16', 64)
    assert cases[0].pointers['x_ptr'] == 'fp16'
    shipped = cases[0].num_warps
    assert {r['num_warps'] for r in results} == {4, shipped}
    assert len(results) == 8
    for row in results:
        assert 0 < row['registers'] <= 255, row
        assert row['spill_bytes'] >= 0 and row['resident_warps'] > 0, row
        assert row['shared_bytes'] >= 0, row
        # The 5x5 tap loops stay loops (one tap's tile live at a time), in
        # code larger than them; the 3x3 conv's 9 taps may be unrolled.
        if '5x5' in row['kernel']:
            assert row['loops'], row
            body = row['loops'][-1]['instructions']
            assert row['instructions'] > body > 0, row
        if row['num_warps'] == shipped:
            assert row['spill_bytes'] == 0, row
            assert not any(loop['spill_accesses'] for loop in row['loops'])
    assert json.loads((tmp_path / 'results.json').read_text()) == results
    table = (tmp_path / 'table.md').read_text()
    assert 'resident warps' in table and 'fp16' in table
    assert 'resident programs' in table and 'compile s' in table
    assert all(row['compile_s'] > 0 for row in results)
    assert [r['shipped'] for r in results] == [
        r['num_warps'] == shipped for r in results
    ]
    loops = (tmp_path / 'loops.md').read_text()
    assert 'depthwise_conv.conv_kernel' in loops and '| loop 0x' in loops
