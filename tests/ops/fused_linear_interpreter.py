"""The fused linear-attention kernels on CPU tensors under Triton's
interpreter, against float64 references.

Run as a script (test_fused_linear.py does, in a fresh process:
TRITON_INTERPRET must be set before triton is imported). Prints one JSON
line: for each case, the relative error ||x - ref|| / ||ref|| of the output
and of the gradient of every input, the output dtype, whether the
outputs hold no NaN or inf, and whether the kernels' dq, dk, dv reached
``split_qkv`` as one buffer (the gradient of qkv, not stacked).

The reference is the PyTorch path in float64 on the inputs as the kernels
see them (rounded to the case's dtype), with the same upstream gradient.
q, k, v are the non-contiguous per-head views of one (B, N, 3, H, d)
tensor, as a ``qkv`` projection gives them.
"""

import contextlib
import functools
import json

import interpreted  # noqa: F401  (TRITON_INTERPRET=1)

# isort: split

import torch

from mmlvit.ops.common import dispatch as fused_linear
from mmlvit.ops.common import linear_launch as function
from mmlvit.ops.common.heads import SplitQKV, split_qkv
from mmlvit.ops.inline import (
    inline_attention,
    inline_attention_reference,
)
from mmlvit.ops.kernel import (
    kernel_linear_attention,
    kernel_linear_attention_reference,
)
from mmlvit.ops.mhla import (
    mhla_attention,
    mhla_attention_reference,
    mhla_linear_mixing,
)

DTYPES = {
    'fp32': torch.float32,
    'bf16': torch.bfloat16,
    'fp16': torch.float16,
}


def attention(mode, q, k, v, backend, mixing=None, hw_shape=None):
    if mode == 'mhla':
        if backend == 'torch':
            return mhla_attention_reference(q, k, v, mixing, hw_shape)
        return mhla_attention(q, k, v, mixing, hw_shape, backend=backend)
    if mode == 'inline':
        if backend == 'torch':
            return inline_attention_reference(q, k, v)
        return inline_attention(q, k, v, backend=backend)
    if backend == 'torch':
        return kernel_linear_attention_reference(q, k, v, kernel=mode)
    return kernel_linear_attention(q, k, v, kernel=mode, backend=backend)


# Whether SplitQKV received dq, dk, dv as slots of one buffer (and passed
# it on as the gradient of qkv without a copy), one entry per backward.
SHARED = []
_split_backward = SplitQKV.backward


def _recording_backward(ctx, dq, dk, dv):
    grad = _split_backward(ctx, dq, dk, dv)
    SHARED.append(grad.data_ptr() == dq.data_ptr())
    return grad


SplitQKV.backward = staticmethod(_recording_backward)

# Whether the forward ran as one launch (Launch.attention), per forward.
ONE_LAUNCH = []
_attention = function.Launch.attention


def _recording_attention(self, q, k, v):
    ONE_LAUNCH.append(True)
    return _attention(self, q, k, v)


function.Launch.attention = _recording_attention


def heads(x):
    """(B, N, 3, H, d) -> q, k, v, each (B, H, N, d), views."""
    return x.permute(2, 0, 3, 1, 4).unbind(0)


def relative(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm()).item()


def dtype_name(dtype):
    """'float32' for torch.float32."""
    return str(dtype).split('.')[-1]


def backward_from_random(out, g=None):
    """Backpropagate a random float64 upstream gradient (of generator
    ``g``) through ``out``; returns it, for the reference's backward."""
    grad_out = torch.randn(out.shape, generator=g, dtype=torch.float64)
    (out.double() * grad_out).sum().backward()
    return grad_out


def output_figures(out, ref, x):
    """The output's dtype, whether it and the gradient of input ``x`` are
    finite, and its relative error to the reference ``ref``."""
    return dict(
        out_dtype=dtype_name(out.dtype),
        finite=bool(
            torch.isfinite(out).all() and torch.isfinite(x.grad).all()
        ),
        out=relative(out, ref),
    )


@contextlib.contextmanager
def keeping_besides(*inputs):
    """Yields the list of shapes of the tensors autograd keeps for
    backward in the block, views of ``inputs`` left out."""
    allowed = {t.untyped_storage().data_ptr() for t in inputs}
    kept = []

    def pack(t):
        if t.untyped_storage().data_ptr() not in allowed:
            kept.append(list(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield kept


def module_against_reference(cls, embed_dims, num_heads, grid, B=2):
    """Attention module ``cls`` on the fused path (fp32) against its
    PyTorch path in float64 on a patch grid: relative errors of the output
    and of the gradients of the input and of every parameter."""
    torch.manual_seed(0)
    fused = cls(embed_dims, num_heads, backend='triton')
    reference = cls(embed_dims, num_heads, backend='torch')
    reference.load_state_dict(fused.state_dict())
    reference.double()
    x = torch.randn(B, grid[0] * grid[1], embed_dims)
    x_fused, x_ref = x.clone().requires_grad_(), x.double().requires_grad_()
    out, ref = fused(x_fused, grid), reference(x_ref, grid)
    grad_out = backward_from_random(out)
    (ref * grad_out).sum().backward()
    grads = dict(x=relative(x_fused.grad, x_ref.grad))
    ref_params = dict(reference.named_parameters())
    for name, param in fused.named_parameters():
        grads[name] = relative(param.grad, ref_params[name].grad)
    return dict(out=relative(out, ref), grads=grads)


def check(
    mode, dtype, N, H=2, d=16, B=2, scale=1.0, seed=0, grid=None, side=2
):
    """One case; ``grid`` (H, W) with N = H*W for MHLA (side x side blocks,
    a randomised mixing matrix whose gradient is checked too)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(B, N, 3, H, d, generator=g) * scale).to(dtype)
    x.requires_grad_()
    extra = {}
    if mode == 'mhla':
        mixing = mhla_linear_mixing(side) + 0.1 * torch.rand(
            side**2, side**2, generator=g
        )
        extra = dict(mixing=mixing.requires_grad_(), hw_shape=grid)
    # What backward keeps besides views of x (q, k, v).
    with keeping_besides(x) as kept:
        out = attention(mode, *split_qkv(x), backend='triton', **extra)
    one_launch = bool(ONE_LAUNCH)
    ONE_LAUNCH.clear()
    grad_out = backward_from_random(out, g)
    shared = SHARED.pop()

    x_ref = x.detach().double().requires_grad_()
    extra_ref = dict(extra)
    if mode == 'mhla':
        extra_ref['mixing'] = mixing.detach().double().requires_grad_()
    ref = attention(mode, *heads(x_ref), backend='torch', **extra_ref)
    (ref * grad_out).sum().backward()
    grads = dict(zip('qkv', heads(x.grad)))
    grads_ref = dict(zip('qkv', heads(x_ref.grad)))
    if mode == 'mhla':
        grads['mixing'] = extra['mixing'].grad
        grads_ref['mixing'] = extra_ref['mixing'].grad
    return dict(
        mode=mode,
        grid=grid,
        dtype=dtype_name(dtype),
        N=N,
        d=d,
        **output_figures(out, ref, x),
        one_launch=one_launch,
        qkv_grad_shared=shared,
        grads={n: relative(grads[n], grads_ref[n]) for n in grads},
        side=side if grid else None,
        kept_besides_qkv=kept,
    )


def head_cases(check, sizes, dtypes=DTYPES.values()):
    """``check(dtype, N)`` in each of ``dtypes`` at each of ``sizes``
    tokens, then in fp32 at ViT-B's head width (``d=64``, one head and one
    image, the last size) and at one not a power of two (``d=24``, the
    first size)."""
    cases = [check(dtype, N) for dtype in dtypes for N in sizes]
    cases.append(check(torch.float32, sizes[-1], d=64, H=1, B=1))
    cases.append(check(torch.float32, sizes[0], d=24))
    return cases


def main():
    modes = ['elu', 'relu', 'identity', 'inline']
    cases = []
    for mode in modes:
        # Signed denominators near 0 (identity): gradients past fp16.
        dtypes = [
            dtype
            for dtype in DTYPES.values()
            if mode != 'identity' or dtype != torch.float16
        ]
        # 50 tokens: one partial tile; 197: a 14x14 grid + class token,
        # four tiles split over four programs per head.
        cases += head_cases(functools.partial(check, mode), (50, 197), dtypes)
    # MHLA: 2 x 2 blocks of a grid that they divide, of odd sides (the
    # last blocks padded), 3 x 3 blocks; fp32 and 16-bit inputs.
    # (20, 18): blocks of 90 tokens, two tiles each, split over programs.
    for grid, side in (((8, 6), 2), ((7, 9), 2), ((10, 7), 3)):
        for dtype in DTYPES.values():
            cases.append(
                check('mhla', dtype, grid[0] * grid[1], grid=grid, side=side)
            )
    cases.append(check('mhla', torch.float32, 360, grid=(20, 18), B=1))
    # Several tiles per program (the split loop), large fp16 inputs whose
    # key sums over the tokens exceed fp16's range unless kept in fp32.
    function.TARGET_PROGRAMS = 2
    for mode in ('elu', 'relu', 'inline'):
        cases.append(check(mode, torch.float32, 300, B=1, H=1))
        cases.append(check(mode, torch.float16, 1000, B=1, H=1, scale=30.0))
    # Every head's reduction one program: the forward in one launch.
    function.TARGET_PROGRAMS = 1
    for mode in modes:
        for dtype in DTYPES.values():
            if mode != 'identity' or dtype != torch.float16:
                cases.append(check(mode, dtype, 197))
        cases.append(check(mode, torch.float32, 50, d=24))
    for mode in ('elu', 'relu', 'inline'):
        cases.append(check(mode, torch.float16, 1000, B=1, H=1, scale=30.0))
    print(json.dumps(dict(cases=cases, modes=list(fused_linear.BACKENDS))))


if __name__ == '__main__':
    main()
