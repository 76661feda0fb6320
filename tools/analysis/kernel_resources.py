"""Registers, spills and resident warps of every fused Triton kernel of the
project at its shipped launch configuration, without a GPU.

Each kernel is compiled by Triton's compiler and the ptxas it ships for an
sm_90 (H100 / H200) multiprocessor, for ViT-B heads (d = 64, 768
channels) in bf16, with the tile sizes and warps its launch code uses
(:mod:`mmlvit.benchmark.kernel_resources`). A kernel that spills keeps
values in local memory (a round trip through the caches each time);
``resident warps`` is how many of its warps one multiprocessor's
registers hold at once. ``--num-warps`` compiles other warp counts beside
the shipped one, to compare.

Example::

    python tools/analysis/kernel_resources.py --out-dir work_dirs/kernels
"""

import argparse
import os.path as osp

from mmengine.utils import mkdir_or_exist

from mmlvit import benchmark as core
from mmlvit.benchmark.kernel_resources import KernelCase, kernel_resources

D = 64  # ViT-B head width
C = 768  # ViT-B channels


def fused_linear_cases():
    from mmlvit.ops.fused_linear import function, kernels

    tokens = {n: 'bf16' for n in ('q', 'k', 'v', 'o', 'do', 'dq', 'dk', 'dv')}
    pointers = {f'{n}_ptr': t for n, t in tokens.items()}
    pointers.update({f'{n}_ptr': 'fp32' for n in ('s', 'z', 'zv')})
    pointers.update({f'{n}_ptr': 'fp32' for n in ('ds', 'dz', 'dzv')})
    constexprs = dict(
        MODE=kernels.RELU, BLOCKED=False, PRECISION='bf16',
        BLOCK_N=function.BLOCK_N, BLOCK_K=D, BLOCK_V=D,
    )  # fmt: skip
    warps = dict(state=function.NUM_WARPS, output=function.NUM_WARPS)
    warps.update(query_grad=function.GRAD_NUM_WARPS)
    warps.update(key_value_grad=function.GRAD_NUM_WARPS)
    return [
        KernelCase(
            f'fused_linear.{name}_kernel',
            getattr(kernels, f'{name}_kernel'),
            pointers,
            constexprs,
            num_warps,
            floats=('eps', 'alpha'),
        )
        for name, num_warps in warps.items()
    ]


def ttt_cases():
    from mmlvit.ops.ttt import swiglu_function as function
    from mmlvit.ops.ttt import swiglu_kernels as kernels

    tokens = ('q', 'k', 'v', 'o', 'do', 'dq', 'dk', 'dv')
    pointers = {f'{n}_ptr': 'bf16' for n in tokens}
    squares = ('w1', 'w2', 'r1', 'r2', 'a1', 'a2', 'dr1', 'dr2', 'g1', 'g2')
    pointers.update({f'{n}_ptr': 'fp32' for n in squares})
    constexprs = dict(
        PRECISION='bf16', BLOCK_N=function.BLOCK_N, BLOCK_D=D,
        W_PER_BATCH=False,
    )  # fmt: skip
    names = ('step_sums', 'output', 'query_grad', 'key_value_grad')
    cases = []
    for name in names:
        fn = getattr(kernels, f'{name}_kernel')
        options = {k: v for k, v in constexprs.items() if k in fn.arg_names}
        cases.append(
            KernelCase(
                f'ttt.swiglu.{name}_kernel',
                fn,
                pointers,
                options,
                function.NUM_WARPS,
            )
        )
    return cases


def depthwise_conv_cases():
    from mmlvit.ops.depthwise_conv import function, kernels

    pointers = {f'{n}_ptr': 'bf16' for n in ('x', 'y', 'g')}
    pointers.update({f'{n}_ptr': 'fp32' for n in ('w', 'bias', 'dw')})
    tiles = dict(BLOCK_N=function.BLOCK_N, BLOCK_C=function.MAX_BLOCK_C)
    cases = []
    for ks, use in ((5, 'MHLA value conv'), (3, 'TTT conv head')):
        conv = dict(PER_IMAGE=ks == 3, HAS_BIAS=ks == 5, FLIP=False)
        grads = dict(TAPS=16 if ks == 3 else 32)
        for name, extra in (('conv', conv), ('weight_grad', grads)):
            cases.append(
                KernelCase(
                    f'depthwise_conv.{name}_kernel ({ks}x{ks}, {use})',
                    getattr(kernels, f'{name}_kernel'),
                    pointers,
                    dict(KS=ks, **tiles, **extra),
                    function.NUM_WARPS,
                )
            )
    return cases


def gla_cases():
    import triton.language as tl

    from mmlvit.ops.gla import triton_backend as backend
    from mmlvit.ops.gla import triton_backward_kernels, triton_kernels

    tokens = ('q', 'k', 'v', 'o', 'do', 'dq', 'dk', 'dv', 'x', 'y')
    pointers = {n: 'bf16' for n in tokens}
    gates = ('gf', 'gb', 'g0', 'g1', 'states', 'd_states', 'out', 'dg')
    pointers.update({n: 'fp32' for n in gates})
    dtypes = dict(DT=tl.bfloat16, DOT=tl.bfloat16)
    chunk = dict(K=D, V=D, BT=backend.CHUNK)
    launch = backend.LAUNCH
    return [
        KernelCase(
            'gla.chunk_states_kernel',
            triton_kernels.chunk_states_kernel,
            pointers,
            dict(chunk, BK=32, BV=32, INCLUSIVE=False, **dtypes),
            launch['states']['num_warps'],
        ),
        KernelCase(
            'gla.bigla_fwd_kernel',
            triton_kernels.bigla_fwd_kernel,
            pointers,
            dict(chunk, BC=backend.SUB_BLOCK, BK=D, BV=D, **dtypes),
            launch['forward']['num_warps'],
            floats=('scale',),
        ),
        KernelCase(
            'gla.bigla_bwd_kernel',
            triton_backward_kernels.bigla_bwd_kernel,
            pointers,
            dict(chunk, BC=backend.SUB_BLOCK, BK=D, BV=D, **dtypes),
            launch['backward']['num_warps'],
            floats=('scale',),
        ),
        KernelCase(
            'gla.gate_grad_cumsum_kernel',
            triton_backward_kernels.gate_grad_cumsum_kernel,
            pointers,
            dict(K=D, BT=backend.CHUNK, BK=32),
            launch['gate_grad']['num_warps'],
        ),
    ]


FAMILIES = {
    'fused_linear': fused_linear_cases,
    'ttt': ttt_cases,
    'depthwise_conv': depthwise_conv_cases,
    'gla': gla_cases,
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Registers, spills and resident warps of the project's "
        'Triton kernels, compiled for sm_90 without a GPU.'
    )
    parser.add_argument(
        '--families',
        nargs='+',
        choices=tuple(FAMILIES),
        default=list(FAMILIES),
        help='kernel families (default: all)',
    )
    parser.add_argument(
        '--num-warps',
        nargs='+',
        type=int,
        default=[],
        help='also compile with these warp counts (the shipped one always)',
    )
    parser.add_argument('--arch', type=int, default=90, help='sm_ARCH')
    core.add_out_dir_argument(
        parser, 'work_dirs/kernel_resources', 'table.md and results.json'
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    mkdir_or_exist(args.out_dir)
    rows, results = [], []
    for family in args.families:
        for case in FAMILIES[family]():
            shipped = case.num_warps
            for warps in sorted({shipped, *args.num_warps}):
                case.num_warps = warps
                used = kernel_resources(case, args.arch)
                results.append(dict(kernel=case.name, num_warps=warps, **used))
                rows.append(
                    [
                        case.name,
                        f'{warps}' + (' (shipped)' * (warps == shipped)),
                    ]
                    + [str(used[k]) for k in ('registers', 'spill_bytes')]
                    + [str(used['shared_bytes']), str(used['resident_warps'])]
                )
                print(' | '.join(rows[-1]), flush=True)
    header = ['kernel', 'warps', 'registers', 'spill bytes', 'shared bytes']
    header.append('resident warps')
    lines = core.markdown_table(header, rows, '--' + ':' * 4)
    lines.insert(0, f'sm_{args.arch}, bf16, head width {D}, per thread\n')
    core.write_json(osp.join(args.out_dir, 'results.json'), results)
    core.write_table(osp.join(args.out_dir, 'table.md'), '\n'.join(lines), [])
    return results


if __name__ == '__main__':
    main()
