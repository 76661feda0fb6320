"""mmlvit's fused bidirectional GLA Triton kernels on CPU tensors, under
Triton's interpreter.

Run as a script (test_gla_triton.py does, in a fresh process:
TRITON_INTERPRET must be set before triton is imported). Prints one JSON
line: for each check, the largest absolute difference of the output and of
every gradient from a float64 oracle (the explicit bidirectional map of
``mmlvit.ops.gla.naive`` times v), the oracle's largest magnitudes, the
dtypes and the strides the kernels received, and seconds per check.
Arguments: names of checks to run (default: all), so a test can rerun one.
"""

import json
import sys
import time

import interpreted  # noqa: F401  (TRITON_INTERPRET=1)

# isort: split

import torch
import torch.nn.functional as F
from fused_linear_interpreter import DTYPES
from gla_inputs import grads, inputs

from mmlvit.ops.common.heads import common_buffer
from mmlvit.ops.gla import (
    bidirectional_gla_gated,
    bidirectional_gla_map,
)
from mmlvit.ops.gla import triton_backward as triton_backward_kernels
from mmlvit.ops.gla import triton_forward as triton_kernels
from mmlvit.ops.gla import triton_function as triton_backend

NAMES = 'q k v g_fwd g_bwd'.split()
FLAG = torch.int32  # the dtype of the passes' chunk flags


def oracle(q, k, v, g_fwd, g_bwd, scale):
    """float64 ``A v`` with A the explicit bidirectional map."""
    q, k, v, g_fwd, g_bwd = (t.double() for t in (q, k, v, g_fwd, g_bwd))
    return bidirectional_gla_map(q, k, g_fwd, g_bwd, scale) @ v


class RecordFlags:
    """A sub-block kernel that keeps, after its last launch of a pass (the
    only one of the forward's, the exact one of the backward's), the
    pass's per-chunk flags under ``key`` in ``seen``: how it took the
    chunks."""

    def __init__(self, kernel, seen, key):
        self.kernel, self.seen, self.key = kernel, seen, key

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.kernel[grid](*args, **kwargs)
            if kwargs.get('EXACT', True):
                flags = [a for a in args if getattr(a, 'dtype', 0) == FLAG]
                self.seen[self.key] = flags[0].flatten().tolist()

        return launch


def chunk_sums(g_fwd, g_bwd, chunk=triton_backend.CHUNK):
    """Each (head, chunk)'s smallest gate sum (any channel or direction),
    in the order of the passes' chunk flags."""
    sums = []
    for gates in zip(g_fwd.flatten(0, 1), g_bwd.flatten(0, 1)):
        for start in range(0, gates[0].shape[0], chunk):
            parts = (g[start : start + chunk].sum(0) for g in gates)
            sums.append(min(p.min().item() for p in parts))
    return sums


def largest_errors(out, ref, got, want):
    """The largest absolute errors of ``out`` and of each gradient against
    the float64 reference, and the reference's largest magnitudes (what
    ``interpreter_run.assert_close`` reads).

    Args:
        out (Tensor): The output; ``ref`` the reference's.
        got (dict[str, Tensor]): The gradients by name.
        want (dict[str, Tensor]): The reference's gradients by name, in
            the report's order.
    """
    return dict(
        out=(out.double() - ref).abs().max().item(),
        out_scale=ref.abs().max().item(),
        grads={
            n: (got[n].double() - g).abs().max().item()
            for n, g in want.items()
        },
        grad_scales={n: g.abs().max().item() for n, g in want.items()},
    )


def compare(tensors, scale=0.4):
    """The triton path against :func:`oracle`, output and gradients, with
    the strides and dtypes that reached the kernels, which chunks the
    forward took whole (1), the kinds of the backward's chunks (2
    whole, 1 factored diagonals, 0 exact ones), the chunks' gate sums
    (:func:`chunk_sums`) and the dtypes of the chunk states the passes
    stored."""
    seen = dict(chunk_sums=chunk_sums(*tensors[3:]))
    forward, backward = triton_backend.forward, triton_backend.backward
    states = triton_backend.chunk_states
    kernels = (
        (triton_kernels, 'bigla_fwd_kernel', 'whole'),
        (triton_backward_kernels, 'bigla_bwd_kernel', 'kinds'),
    )
    originals = [getattr(module, name) for module, name, _ in kernels]
    for (module, name, key), kernel in zip(kernels, originals):
        setattr(module, name, RecordFlags(kernel, seen, key))

    def recording(q, k, v, g_fwd, g_bwd, scale):
        seen.update(q=q.stride(), k=k.stride(), v=v.stride())
        seen.update(dtype=str(q.dtype), gate_dtype=str(g_fwd.dtype))
        return forward(q, k, v, g_fwd, g_bwd, scale)

    def recording_backward(*args):
        dq, dk, dv, *dg = backward(*args)
        seen['qkv_grad_buffer'] = common_buffer(dq, dk, dv) is not None
        return dq, dk, dv, *dg

    def recording_states(*args):
        out = states(*args)
        seen.setdefault('states_dtypes', []).append(str(out.dtype))
        return out

    triton_backend.forward = recording
    triton_backend.backward = recording_backward
    triton_backend.chunk_states = recording_states
    try:
        out = triton_backend.bidirectional_triton(*tensors, scale)
        fn = lambda *a: triton_backend.bidirectional_triton(*a, scale)  # noqa: E731
        got = grads(fn, tensors)
    finally:
        triton_backend.forward, triton_backend.backward = forward, backward
        triton_backend.chunk_states = states
        for (module, name, _), kernel in zip(kernels, originals):
            setattr(module, name, kernel)
    ref = oracle(*tensors, scale)
    want = grads(lambda *a: oracle(*a, scale), tensors)
    return dict(
        dtype=str(out.dtype),
        finite=bool(out.isfinite().all())
        and all(bool(g.isfinite().all()) for g in got),
        **largest_errors(
            out, ref, dict(zip(NAMES, got)), dict(zip(NAMES, want))
        ),
        grad_dtypes={n: str(a.dtype) for n, a in zip(NAMES, got)},
        kernel=seen,
    )


def strided(T, dtype, B=1, H=3, d=16):
    """q, k, v as the attention module makes them: views of one (B, T, 3,
    H, d) projection, permuted to (B, H, T, d), never copied. Gates
    weakest in head 0 and strongest in head 2, so that the backward takes
    chunks of every kind (see test_gla_triton.py)."""
    q, k, v, g_fwd, g_bwd = inputs(
        B=B, H=H, T=T, d=d, dtype=torch.float32, seed=T, gate=2
    )
    for g in (g_fwd, g_bwd):
        g[:, 0] /= 2.2
        g[:, 1] /= 1.7
    qkv = torch.stack([q, k, v], dim=2).permute(0, 3, 2, 1, 4).contiguous()
    q, k, v = qkv.to(dtype).permute(2, 0, 3, 1, 4)
    return [q, k, v, g_fwd, g_bwd]


def check_strided(T, dtype):
    """(B, T, 3, H, d) views in ``dtype``, fp32 gates."""
    tensors = strided(T, DTYPES[dtype])
    report = compare(tensors)
    report['view_strides'] = tensors[0].stride()
    return report


def check_vanishing(T):
    """fp32, d_k = 24 (not a power of two), d_v = 16, gates of -30 and -60
    in places (decays far below fp32's range across them)."""
    q, k, v, g_fwd, g_bwd = inputs(
        B=1, H=1, T=T, d=24, dv=16, dtype=torch.float32, seed=7, gate=2
    )
    g_fwd[:, :, ::7] = -30.0
    g_bwd[:, :, 3::11, ::2] = -60.0
    return compare([q, k, v, g_fwd, g_bwd])


def check_widths(T):
    """fp32, d_k = 24, d_v = 16 (masked tiles) in the factored kernels:
    head 0's gates / 2.2 (chunks taken whole), head 1's / 1.7 (by
    sub-blocks with factored diagonals)."""
    q, k, v, g_fwd, g_bwd = inputs(
        B=1, H=2, T=T, d=24, dv=16, dtype=torch.float32, seed=11, gate=2
    )
    for g in (g_fwd, g_bwd):
        g[:, 0] /= 2.2
        g[:, 1] /= 1.7
    return compare([q, k, v, g_fwd, g_bwd])


def check_wide(T):
    """fp32, heads of 64 channels (ViT-B's): the state scans take two
    blocks of 32 key channels, each by all 64 value channels."""
    return compare(
        inputs(B=1, H=1, T=T, d=64, dtype=torch.float32, seed=5, gate=2)
    )


def check_plain_gates(T):
    """``bidirectional_gla_gated`` on the triton backend with a gates
    function that does not take ``chunk`` (log-sigmoids of two logit
    tensors), fp32, d = 16: output and the gradients of q, k, v and both
    logits against the float64 oracle."""
    q, k, v = inputs(B=1, H=2, T=T, d=16, dtype=torch.float32, seed=13, gate=0)
    gen = torch.Generator().manual_seed(14)
    logits = [3 * torch.randn(q.shape, generator=gen) for _ in range(2)]

    def gates(a, b):
        return F.logsigmoid(a), F.logsigmoid(b)

    tensors = [q, k, v, *logits]

    def fn(q, k, v, a, b):
        return bidirectional_gla_gated(
            q, k, v, gates, a, b, scale=0.4, backend='triton'
        )

    out = fn(*tensors)
    got = grads(fn, tensors)

    def ref_fn(q, k, v, a, b):
        return oracle(q, k, v, *gates(a, b), 0.4)

    doubles = [t.double() for t in tensors]
    ref = ref_fn(*doubles)
    want = grads(ref_fn, doubles)
    names = 'q k v logits_fwd logits_bwd'.split()
    return dict(
        finite=bool(out.isfinite().all()),
        **largest_errors(
            out, ref, dict(zip(names, got)), dict(zip(names, want))
        ),
    )


def module_gradients(m, x, hw_shape):
    """Output, and gradients of x and of every parameter, of ``m``."""
    x = x.clone().requires_grad_()
    m.zero_grad()
    out = m(x, hw_shape)
    out.square().sum().backward()
    grads = {n: p.grad for n, p in m.named_parameters()}
    return out, dict(grads, x=x.grad)


def check_module(T_grid):
    """GatedLinearAttention (C = 32, 2 heads of 16, a class token) on the
    triton backend against the same module in float64 on the torch
    backend: output, input and every parameter gradient (the gates are
    recomputed from the tokens and the gate weights inside the kernels'
    autograd Function). Then one bf16-autocast forward: what the module
    keeps for backward (dtype, shape, parameter or not)."""
    from mmpretrain.registry import MODELS

    import mmlvit  # noqa: F401

    hw_shape = (T_grid, T_grid)
    torch.manual_seed(0)
    cfg = dict(type='GatedLinearAttention', embed_dims=32, num_heads=2)
    m = MODELS.build(cfg | dict(backend='triton'))
    with torch.no_grad():  # gates far from 1: the decays matter
        m.gate_up.bias.normal_(0, 4)
    ref = MODELS.build(cfg | dict(backend='torch')).double()
    ref.load_state_dict(m.state_dict())
    x = torch.randn(
        2, T_grid * T_grid + 1, 32, generator=torch.Generator().manual_seed(3)
    )
    out, got = module_gradients(m, x, hw_shape)
    ref_out, want = module_gradients(ref, x.double(), hw_shape)
    params = {p.data_ptr() for p in m.parameters()}
    saved = []

    def pack(t):
        saved.append(
            dict(
                dtype=str(t.dtype),
                shape=list(t.shape),
                parameter=t.data_ptr() in params,
            )
        )
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast('cpu', dtype=torch.bfloat16):
            m(x, hw_shape)
    return dict(
        **largest_errors(out, ref_out, got, want),
        saved=saved,
    )


CHECKS = {
    # 3 chunks of 64 (the last partial): both states in the middle one.
    'strided fp32 T=150': (check_strided, (150, 'fp32')),
    'vanishing fp32 T=80': (check_vanishing, (80,)),
    'widths fp32 T=150': (check_widths, (150,)),
    'wide fp32 T=80': (check_wide, (80,)),
    'plain gates fp32 T=80': (check_plain_gates, (80,)),
    'strided bf16 T=80': (check_strided, (80, 'bf16')),
    'strided fp16 T=80': (check_strided, (80, 'fp16')),
    # 7 x 7 patches and a class token: T = 50, one partial chunk.
    'module fp32 T=50': (check_module, (7,)),
}


def main(names):
    torch.set_num_threads(1)
    results, seconds = {}, {}
    for name in names or CHECKS:
        check, args = CHECKS[name]
        start = time.perf_counter()
        results[name] = check(*args)
        seconds[name] = round(time.perf_counter() - start, 2)
    print(json.dumps(dict(results=results, seconds=seconds)))


if __name__ == '__main__':
    main(sys.argv[1:])
