"""The launch variants (lab.benchmarks.launch_variants) and
tools/analysis/launch_variants.py, run under Triton's interpreter at tiny
sizes (the timings mean something on a GPU only)."""

import json
import os
import subprocess

import pytest
import torch

from lab.benchmarks.launch_variants import BY_NAME, Patch, Variant

SCRIPT = 'tools/analysis/launch_variants.py'
SM90 = (9, 0)


def _stages():
    from mmlvit.ops.common.triton_runtime import num_stages

    return num_stages(10**6)


def _gla_whole_warps():
    from mmlvit.ops.gla.triton_function import launch_options

    kinds = ('whole_forward', 'whole_backward')
    return {launch_options(k, SM90)['num_warps'] for k in kinds}


def _gla_scan_warps():
    from mmlvit.ops.gla.triton_function import states_launch

    return states_launch(10**6)['num_warps']


def _gla_gate_grad_warps():
    from mmlvit.ops.gla.gates import grad_options

    return grad_options(SM90)['num_warps']


def _gla_gate_grad_products():
    from mmlvit.ops.gla.gates import feature_constants, grad_options

    return (
        grad_options(SM90)['PRECISION'],
        feature_constants(16, grad=True)['PRECISION'],
    )


def _gla_log_gate_options():
    from mmlvit.ops.gla import gates

    return gates.LOG_GATE_OPTIONS


def _ttt_query_grad_warps():
    from mmlvit.ops.ttt.swiglu_function import SwiGLULaunch

    q = torch.empty(128, 12, 197, 64, dtype=torch.bfloat16, device='meta')
    return SwiGLULaunch(q, 1.0, capability=SM90).query_grad_options()[
        'num_warps'
    ]


# What each variant changes, read through the launch code, shipped and
# with the variant.
PROBES = {
    'three-stage-loops': (_stages, 1, 3),
    'gla-whole-8-warps': (_gla_whole_warps, {4}, {8}),
    'gla-scan-4-warps': (_gla_scan_warps, 8, 4),
    'gla-gate-grad-8-warps': (_gla_gate_grad_warps, 4, 8),
    'gla-gate-grads-fp32-products': (
        _gla_gate_grad_products,
        ('tf32x3', 'tf32x3'),
        ('ieee', 'ieee'),
    ),
    'gla-log-gates-uncapped': (_gla_log_gate_options, dict(maxnreg=64), {}),
    'ttt-query-grad-8-warps': (_ttt_query_grad_warps, 4, 8),
}


def test_every_variant_has_a_probe():
    assert set(PROBES) == set(BY_NAME)


@pytest.mark.parametrize('name', sorted(PROBES))
def test_variant_changes_what_the_launch_code_reads_then_restores_it(name):
    probe, shipped, changed = PROBES[name]
    assert probe() == shipped
    with BY_NAME[name].applied():
        assert probe() == changed
    assert probe() == shipped


def test_a_missing_constant_fails_and_restores_the_patches_before_it():
    from mmlvit.ops.common import triton_runtime

    variant = Variant(
        'broken',
        'a renamed constant',
        (),
        (
            Patch(
                'mmlvit.ops.common.triton_runtime',
                'MANY_PROGRAMS',
                lambda _: 1,
            ),
            Patch('mmlvit.ops.common.triton_runtime', 'NO_SUCH_CONSTANT', id),
        ),
    )
    shipped = triton_runtime.MANY_PROGRAMS
    with pytest.raises(AttributeError, match='NO_SUCH_CONSTANT.*rename it'):
        with variant.applied():
            pass
    assert triton_runtime.MANY_PROGRAMS == shipped
    assert not hasattr(triton_runtime, 'NO_SUCH_CONSTANT')


def _run(repo_root, python, *args, interpret=True):
    env = dict(os.environ, OMP_NUM_THREADS='1')
    env.pop('TRITON_INTERPRET', None)
    if interpret:
        env['TRITON_INTERPRET'] = '1'
    return subprocess.run(
        [python, SCRIPT, *args],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_tool_times_variants_against_the_shipped_options(
    repo_root, python, tmp_path
):
    """Under the interpreter each variant's kernels run and give the
    shipped options' results exactly (warps and stages change nothing
    there); the table has a row per variant, operator and case."""
    out = _run(
        repo_root, python,
        '--variants', 'gla-whole-8-warps', 'ttt-query-grad-8-warps',
        '--embed-dims', '32', '--num-heads', '2', '--cases', '64:1',
        '--repeats', '1', '--out-dir', str(tmp_path),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads((tmp_path / 'variants.json').read_text())['rows']
    assert [(r['variant'], r['operator'], r['N']) for r in rows] == [
        ('gla-whole-8-warps', 'GatedLinearAttention', 17),
        ('ttt-query-grad-8-warps', 'TTTAttention', 16),
    ]
    for row in rows:
        assert row['status'] == 'ok'
        assert row['difference'] == 0.0
        assert row['shipped_s'] > 0 and row['variant_s'] > 0
    table = (tmp_path / 'variants.md').read_text()
    assert '| gla-whole-8-warps | GatedLinearAttention | 64 | 1 |' in table
    assert BY_NAME['ttt-query-grad-8-warps'].what in table


def test_tool_refuses_the_cpu_without_the_interpreter(
    repo_root, python, tmp_path
):
    out = _run(repo_root, python, '--out-dir', str(tmp_path), interpret=False)
    assert out.returncode == 2
    assert 'TRITON_INTERPRET=1' in out.stderr


def test_tool_rejects_a_case_off_the_patch_grid(repo_root, python, tmp_path):
    out = _run(repo_root, python, '--cases', '225:8')
    assert out.returncode == 2
    assert "'225:8': PX:BATCH, PX a multiple of 16" in out.stderr
