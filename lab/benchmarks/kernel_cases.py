"""The fused Triton kernels of the project as
:class:`~lab.benchmarks.kernel_resources.KernelCase` objects, family by
family, at the launch configuration their launch code gives them (read from
the launch objects themselves) for ViT-B heads at 224 px, batch 128:
what ``tools/analysis/kernel_resources.py`` compiles without a GPU."""

import re

import torch

from .kernel_resources import KernelCase

C = 768  # ViT-B channels
# The launches' grids as at 224 px (197 tokens), batch 128: whether a
# kernel's loops copy tiles ahead depends on its programs
# (mmlvit.ops.common.triton_runtime.num_stages).
BATCH, TOKENS = 128, 197


def _heads(d, dtype):
    """Queries (B, H, N, d) of such a call, ViT-B's C / d heads, on the
    meta device (the launch objects read shapes only)."""
    return torch.empty(BATCH, C // d, TOKENS, d, dtype=dtype, device='meta')


def _split_warps(options):
    """(compile-time options, num_warps) of a launch's keyword options."""
    options = dict(options)
    return options, options.pop('num_warps')


def _launch_case(name, fn, pointers, options, **kwargs):
    """The KernelCase of a launch with keyword ``options``: ``fn``'s
    compile-time arguments, its warps, and the rest as Triton's launch
    options (``num_stages``, ``ptx_options``)."""
    own, warps = _split_warps(options)
    launch_options = {k: own.pop(k) for k in set(own) - set(fn.arg_names)}
    return KernelCase(
        name, fn, pointers, own, warps, options=launch_options, **kwargs
    )


def fused_linear_cases(dtype, name, d, arch=90):
    from mmlvit.ops.common import linear_kernels as kernels
    from mmlvit.ops.common import linear_launch as function

    tokens = ('q', 'k', 'v', 'o', 'do', 'dq', 'dk', 'dv')
    pointers = {f'{n}_ptr': name for n in tokens}
    states = ('s', 'z', 'zv', 'ds', 'dz', 'dzv')
    pointers.update({f'{n}_ptr': 'fp32' for n in states})
    q = _heads(d, dtype)
    launch = function.Launch(q, q, 'relu', 1e-6, 1.0)
    kinds = dict(
        state=launch.state_constants,
        output=launch.output_constants,
        attention=launch.one_launch_constants,
        query_grad=launch.query_grad_constants,
        key_value_grad=launch.grad_constants,
    )
    return [
        _launch_case(
            f'fused_linear.{kind}_kernel',
            getattr(kernels, f'{kind}_kernel'),
            pointers,
            options,
            floats=('eps', 'alpha'),
        )
        for kind, options in kinds.items()
    ]


def ttt_cases(dtype, name, d, arch=90):
    from mmlvit.ops.ttt import swiglu_kernels as kernels
    from mmlvit.ops.ttt.swiglu_function import SwiGLULaunch, step_options

    tokens = ('q', 'k', 'v', 'o', 'do', 'dq', 'dk', 'dv')
    pointers = {f'{n}_ptr': name for n in tokens}
    squares = ('w1', 'w2', 'r1', 'r2', 'a1', 'a2', 'dr1', 'dr2', 'g1', 'g2')
    squares += ('w', 'r', 'out', 'dw', 'dr')  # the step's
    pointers.update({f'{n}_ptr': 'fp32' for n in squares})
    launch = SwiGLULaunch(_heads(d, dtype), 1.0, capability=divmod(arch, 10))
    cases = []
    for kind in ('step_sums', 'output', 'query_grad', 'key_value_grad'):
        fn = getattr(kernels, f'{kind}_kernel')
        per_batch = 'W_PER_BATCH' in fn.arg_names
        weights = dict(W_PER_BATCH=False) if per_batch else {}
        if kind == 'query_grad':
            options = launch.query_grad_options()
        elif kind == 'key_value_grad':
            options = launch.grad_options(**weights)
        else:
            options = launch.kernel_options(**weights)
        cases.append(
            _launch_case(f'ttt.swiglu.{kind}_kernel', fn, pointers, options)
        )
    own, warps = _split_warps(step_options(d))
    for kind, weights in (
        ('step', dict(W_PER_BATCH=False)),
        ('step_grad', {}),
    ):
        fn = getattr(kernels, f'{kind}_kernel')
        constexprs = dict(own, **weights)
        cases.append(
            KernelCase(
                f'ttt.swiglu.{kind}_kernel', fn, pointers, constexprs, warps,
                ('factor',),
            )
        )  # fmt: skip
    return cases


def depthwise_conv_cases(dtype, name, d, arch=90):
    from mmlvit.ops.common import depthwise_kernels as kernels
    from mmlvit.ops.common.depthwise_function import GridLaunch

    pointers = {f'{n}_ptr': name for n in ('x', 'y', 'g')}
    pointers.update({f'{n}_ptr': 'fp32' for n in ('w', 'bias', 'dw')})
    cases = []
    for ks, channels, use in ((5, C, 'MHLA value conv'), (3, d, 'TTT head')):
        launch = GridLaunch(torch.empty(1, channels, 14, 14, dtype=dtype), ks)
        # TTT's head steps its weights per image; MHLA's conv has a bias.
        conv = launch.conv_constants(
            per_image=ks == 3, has_bias=ks == 5, flip=False
        )
        for kind, options in (
            ('conv', conv),
            ('weight_grad', launch.constants),
        ):
            fn = getattr(kernels, f'{kind}_kernel')
            # Grids laid out token-major: the channels' strides are 1.
            ones = tuple(a for a in ('sxc', 'syc', 'sgc') if a in fn.arg_names)
            name = f'depthwise_conv.{kind}_kernel ({ks}x{ks}, {use})'
            cases.append(
                KernelCase(
                    name, fn, pointers, *_split_warps(options), ones=ones
                )
            )
    return cases


def gla_cases(dtype, name, d, arch=90):
    from mmlvit.ops.gla import triton_backward, triton_forward
    from mmlvit.ops.gla import triton_function as backend

    tokens = ('q', 'k', 'v', 'o', 'do', 'dq', 'dk', 'dv', 'x', 'y')
    tokens += ('states', 'd_states', 'out')  # chunk states in DT
    pointers = {n: name for n in tokens}
    gates = ('cum_f', 'cum_b', 'g0', 'g1', 'dg')
    pointers.update({n: 'fp32' for n in gates})
    pointers.update(whole='i32', kinds='i32')
    DT, DOT = backend._dtypes(dtype)
    tiles = backend.tile_widths(d, d)
    chunk = dict(K=d, V=d, BT=backend.CHUNK, DT=DT, DOT=DOT)
    blocks = dict(chunk, BC=backend.SUB_BLOCK, **tiles['backward'])
    # (compile-time options, num_warps) of each launch
    capability = divmod(arch, 10)
    launch = {
        kind: _split_warps(backend.launch_options(kind, capability))
        for kind in backend.LAUNCH
    }
    programs = 2 * BATCH * (C // d) * -(-d // tiles['states']['BK'])
    launch['states'] = _split_warps(backend.states_launch(programs))
    cases = [
        KernelCase(
            'gla.chunk_states_kernel',
            triton_forward.chunk_states_kernel,
            pointers,
            dict(chunk, **tiles['states'], INCLUSIVE=False),
            launch['states'][1],
            options=launch['states'][0],
        ),
        KernelCase(
            'gla.chunk_fwd_kernel (whole chunks)',
            triton_forward.chunk_fwd_kernel,
            pointers,
            dict(chunk, **tiles['forward']),
            launch['whole_forward'][1],
            floats=('scale',),
            options=launch['whole_forward'][0],
        ),
        KernelCase(
            'gla.bigla_fwd_kernel',
            triton_forward.bigla_fwd_kernel,
            pointers,
            dict(blocks, **tiles['forward']),
            launch['forward'][1],
            floats=('scale',),
            options=launch['forward'][0],
        ),
        *(
            KernelCase(
                f'gla.chunk_bwd_kernel (whole chunks, {name})',
                triton_backward.chunk_bwd_kernel,
                pointers,
                dict(blocks, PART=part),
                launch['whole_backward'][1],
                floats=('scale',),
                options=launch['whole_backward'][0],
            )
            for part, name in zip(triton_backward.PARTS, ('dq', 'dk', 'dv'))
        ),
        *(
            KernelCase(
                f'gla.bigla_bwd_kernel ({diagonal})',
                triton_backward.bigla_bwd_kernel,
                pointers,
                dict(blocks, EXACT=diagonal == 'exact diagonals'),
                launch['backward'][1],
                floats=('scale',),
                options=launch['backward'][0],
            )
            for diagonal in ('factored diagonals', 'exact diagonals')
        ),
        KernelCase(
            'gla.gate_grad_carry_kernel',
            triton_backward.gate_grad_carry_kernel,
            pointers,
            dict(K=d, BT=backend.CHUNK, **tiles['gate_grad']),
            launch['gate_grad'][1],
            options=launch['gate_grad'][0],
        ),
    ]
    from mmlvit.ops.gla import gate_kernels, gates

    gate_pointers = dict.fromkeys(
        (f'{n}_ptr' for n in ('f', 'w', 'b', 'g', 'dg', 'df', 'dw', 'db')),
        'fp32',
    )
    rank = 16  # GatedLinearAttention's default gate_low_rank
    constants = gates.launch_constants(d, rank, True)
    grad = dict(constants, **gates.grad_options(capability))
    cases += [
        KernelCase(
            f'gla.{kind}{name}', getattr(gate_kernels, kind), gate_pointers,
            *_split_warps(dict(options, **direction)),
            floats=('inv_temperature',),
            options={} if direction else gates.LOG_GATE_OPTIONS,
        )
        for kind, name, options, direction in (
            ('log_gate_kernel', '', constants, {}),
            ('log_gate_grad_kernel', ' (forward gates)', grad,
             dict(DIRECTION=0)),
            ('log_gate_grad_kernel', ' (backward gates)', grad,
             dict(DIRECTION=1)),
        )
    ]  # fmt: skip
    feature_pointers = dict(gate_pointers, x_ptr=name, dx_ptr=name)
    cases += [
        KernelCase(
            f'gla.{kind}', getattr(gate_kernels, kind), feature_pointers,
            *_split_warps(gates.feature_constants(rank, grad=backward)),
        )
        for kind, backward in (
            ('gate_features_kernel', False),
            ('gate_features_grad_kernel', True),
        )
    ]  # fmt: skip
    for case in cases:  # s<tensor>d, the channels' strides: contiguous
        names = case.fn.arg_names
        case.ones = tuple(a for a in names if re.fullmatch(r's\w+d', a))
    return cases


def gated_norm_cases(dtype, name, d, arch=90):
    from mmlvit.ops.gla import gate_kernels as function
    from mmlvit.ops.gla import gate_kernels as kernels

    tokens = ('o', 'z', 'y', 'dy', 'do', 'dz')
    pointers = {f'{n}_ptr': name for n in tokens}
    pointers.update(w_ptr='fp32', dw_ptr='fp32')
    launch = function.RowLaunch(torch.empty(1, 1, 64, d, dtype=dtype))
    options = _split_warps(launch.constants)
    return [
        KernelCase(
            f'gated_norm.{kind}', getattr(kernels, kind), pointers, *options,
            floats=('eps',),
        )
        for kind in ('gated_norm_kernel', 'gated_norm_grad_kernel')
    ]  # fmt: skip


# Each builder takes (token dtype, its name, head width, arch) and gives
# the family's kernels as its launch code would run them on sm_<arch>
# (only TTT's launches differ between architectures: ptxas options).
FAMILIES = {
    'fused_linear': fused_linear_cases,
    'ttt': ttt_cases,
    'depthwise_conv': depthwise_conv_cases,
    'gla': gla_cases,
    'gated_norm': gated_norm_cases,
}
