"""TTT's SwiGLU inner model as autograd Functions (launch code for
:mod:`.swiglu_kernels`).

Three Functions: :class:`StepSums` (k, v, W1, W2 -> the inner gradients'
raw sums R1, R2, fp32 (B, H, d, d)), :class:`ClippedStep` (W, R -> the
norm-clipped step W', fp32 (B, H, d, d)) and
:class:`~mmlvit.ops.common.recompute.OutputsOfStates` (q and a function giving
W1', W2' from the other two -> o; :class:`SwiGLULaunch` runs its kernels).
Forward is one reduction over token ranges (partial sums added up in
fp32), one step launch per weight and one output launch; backward one
reduction for dq and dW', the steps' backward, and one reduction for dk,
dv and dW. Saved for backward: q, k, v (views of the caller's tensors, no
copies) and the learned weights; the sums and the stepped weights are
recomputed (one more reduction in backward), the N-sized intermediates
never leave registers.
"""

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..common.linear_launch import (
    Launch,
    _empty_heads,
    _strides,
    _unit_last_stride,
    _width,
)
from ..common.recompute import OutputsOfStates
from ..common.triton_runtime import compute_capability, fused_entry, num_stages
from . import swiglu_kernels as kernels

# Each program holds up to six fp32 d x d matrices (W1, W2, two sums or
# gradients and two partial sums: 96 KB at d = 64) and a dozen fp32 token
# tiles: twice the fused linear attentions' warps and half their tiles keep
# that within the registers (about 200 per thread at d = 64).
NUM_WARPS = 8
BLOCK_N = 32
# On sm_80 the gradient kernels with fp32 inputs compile at ptxas -O1:
# at -O3 ptxas falls back to 32 registers a thread (README.md).
SM80_PTXAS_OPTIONS = '--opt-level 1'
# The gradient kernels load one token tile ahead (2 stages), not two:
# Triton's default of 3 needs more shared memory than an A100 has for the
# key-value gradient in fp16.
GRAD_NUM_STAGES = 2
# The query gradient with half-precision tokens on sm_90 at 4 warps: no
# spill and fewer instructions a program than at 8 (README.md).
QUERY_GRAD_HALF_WARPS_SM90 = 4


class SwiGLULaunch(Launch):
    """One call's kernel launches (:class:`Launch`'s shapes, tile widths
    and token splits, one segment); its states are the stepped weights
    W1', W2' (fp32 (B, H, d, d)), for
    :class:`~mmlvit.ops.common.recompute.OutputsOfStates`.

    Args:
        q (Tensor): (B, H, N, d) queries (or keys: shapes and dtype).
        scale (float): InLine's s, passed on to :class:`Launch`.
        capability (tuple, optional): The GPU's (major, minor), for its
            ptxas options; defaults to q's device's (None off CUDA).
    """

    def __init__(self, q, scale, capability=None):
        super().__init__(q, q, 'identity', 0.0, scale, block_n=BLOCK_N)
        self.capability = capability or compute_capability(q.device)

    def kernel_options(self, **extra):
        """The kernels' compile-time options, ``extra`` over them. fp32
        inputs multiply as three tf32 products (fp32's accuracy on tensor
        cores): at 'ieee' the compiler keeps these kernels' product tiles
        in local memory (README.md). Their loops copy nothing ahead
        where the grid has many programs (``num_stages``)."""
        precision = self.constants['PRECISION']
        options = dict(
            PRECISION='tf32x3' if precision == 'ieee' else precision,
            BLOCK_N=self.constants['BLOCK_N'],
            BLOCK_D=self.BK,
            num_warps=NUM_WARPS,
            num_stages=num_stages(self.BH * self.splits),
        )
        return dict(options, **extra)

    def grad_options(self, **extra):
        """:meth:`kernel_options` of the two gradient kernels, loading
        :data:`GRAD_NUM_STAGES` tiles at a time; with fp32 inputs they load
        their d x d matrices once per tile, not once (``RELOAD_SQUARES``;
        held, they need more shared memory than a program may have), and
        on sm_80 take :data:`SM80_PTXAS_OPTIONS`."""
        reload = self.constants['PRECISION'] == 'ieee'
        options = self.kernel_options(
            RELOAD_SQUARES=reload, num_stages=GRAD_NUM_STAGES, **extra
        )
        if self.capability == (8, 0) and reload:
            options['ptx_options'] = SM80_PTXAS_OPTIONS
        return options

    def query_grad_options(self):
        """:meth:`grad_options` of the query gradient, at
        :data:`QUERY_GRAD_HALF_WARPS_SM90` warps with half-precision
        tokens on sm_90."""
        options = self.grad_options()
        if self.capability == (9, 0) and not options['RELOAD_SQUARES']:
            options['num_warps'] = QUERY_GRAD_HALF_WARPS_SM90
        return options

    @property
    def sizes(self):
        """The kernels' H, D, N."""
        return self.H, self.DK, self.N

    def square_partials(self, device):
        """Two fp32 (B*H, splits, d, d) buffers of per-split sums."""
        shape = (self.BH, self.splits, self.DK, self.DK)
        return torch.empty(shape, device=device), torch.empty(
            shape, device=device
        )

    def total(self, partials):
        """Per-split partial sums added up: (B, H, d, d); a view where
        there is one split (a large batch fills the GPU without them)."""
        d = self.DK
        summed = partials[:, 0] if self.splits == 1 else partials.sum(1)
        return summed.view(self.B, self.H, d, d)

    def output(self, q, states):
        """o = (q W1') * silu(q W2'), (B, H, N, d) in q's dtype, stored
        (B, N, H, d)."""
        w1, w2 = states
        q = _unit_last_stride(q)
        o = _empty_heads(q, self.DK)
        kernels.output_kernel[(self.BH, self.splits)](
            q, o, w1, w2, *_strides(q), *_strides(o), *self.sizes,
            self.per_split, **self.kernel_options(),
        )  # fmt: skip
        return o

    def query_grads(self, q, do, states):
        """dq and the gradients of W1', W2'."""
        w1, w2 = states
        q, do = _unit_last_stride(q), _unit_last_stride(do)
        dq = self.gradient(q, 0)
        a1, a2 = self.square_partials(q.device)
        kernels.query_grad_kernel[(self.BH, self.splits)](
            q, do, dq, w1, w2, a1, a2,
            *_strides(q), *_strides(do), *_strides(dq), *self.sizes,
            self.splits, self.per_split, **self.query_grad_options(),
        )  # fmt: skip
        return dq, (self.total(a1), self.total(a2))


class StepSums(torch.autograd.Function):
    """k, v (B, H, N, d), learned W1, W2 (1 or B, H, d, d) -> R1, R2
    (B, H, d, d) fp32."""

    @staticmethod
    def forward(ctx, k, v, w1, w2, launch):
        k, v = _unit_last_stride(k), _unit_last_stride(v)
        w1_f, w2_f = (w.float().contiguous() for w in (w1, w2))
        per_batch = w1.shape[0] > 1
        r1, r2 = launch.square_partials(k.device)
        kernels.step_sums_kernel[(launch.BH, launch.splits)](
            k, v, w1_f, w2_f, r1, r2, *_strides(k), *_strides(v),
            *launch.sizes, launch.splits, launch.per_split,
            **launch.kernel_options(W_PER_BATCH=per_batch),
        )  # fmt: skip
        ctx.save_for_backward(k, v, w1_f, w2_f)
        ctx.launch, ctx.w_dtypes = launch, (w1.dtype, w2.dtype)
        return launch.total(r1), launch.total(r2)

    @staticmethod
    @once_differentiable
    def backward(ctx, dr1, dr2):
        k, v, w1, w2 = ctx.saved_tensors
        launch = ctx.launch
        per_batch = w1.shape[0] > 1
        dr1, dr2 = (t.float().contiguous() for t in (dr1, dr2))
        dk, dv = launch.gradient(k, 1), launch.gradient(v, 2)
        g1, g2 = launch.square_partials(k.device)
        kernels.key_value_grad_kernel[(launch.BH, launch.splits)](
            k, v, dk, dv, w1, w2, dr1, dr2, g1, g2,
            *_strides(k), *_strides(v), *_strides(dk), *_strides(dv),
            *launch.sizes, launch.splits, launch.per_split,
            **launch.grad_options(W_PER_BATCH=per_batch),
        )  # fmt: skip
        dw1, dw2 = launch.total(g1), launch.total(g2)
        if not per_batch:
            dw1, dw2 = dw1.sum(0, keepdim=True), dw2.sum(0, keepdim=True)
        dtypes = ctx.w_dtypes
        return dk, dv, dw1.to(dtypes[0]), dw2.to(dtypes[1]), None


class ClippedStep(torch.autograd.Function):
    """Learned W (1 or B, H, d, d), raw sums R (B, H, d, d) fp32 and the
    factor f -> W' = W - G / (||G|| + 1), G = f R, the norm over the
    input axis (:func:`.naive.normalised`), fp32 (B, H, d, d): one
    launch each way (:func:`.swiglu_kernels.step_kernel`). Saves R."""

    @staticmethod
    def forward(ctx, w, r, factor):
        B, H, d, _ = r.shape
        r = r.contiguous()
        stepped = torch.empty_like(r)
        kernels.step_kernel[(B * H,)](
            w.float().contiguous(), r, stepped, H, d, factor,
            W_PER_BATCH=w.shape[0] > 1, **step_options(d),
        )  # fmt: skip
        ctx.save_for_backward(r)
        ctx.factor, ctx.w_shape, ctx.w_dtype = factor, w.shape, w.dtype
        return stepped

    @staticmethod
    @once_differentiable
    def backward(ctx, d_stepped):
        (r,) = ctx.saved_tensors
        B, H, d, _ = r.shape
        d_stepped = d_stepped.float().contiguous()
        dr = torch.empty_like(r)
        kernels.step_grad_kernel[(B * H,)](
            r, d_stepped, dr, d, ctx.factor, **step_options(d)
        )
        dw = d_stepped.sum_to_size(ctx.w_shape).to(ctx.w_dtype)
        return dw, dr, None


def step_options(d):
    """Launch options of the step kernels: the d x d matrix in one tile."""
    return dict(BLOCK_D=_width(d), num_warps=4)


@fused_entry
def fused_ttt_swiglu(
    q: Tensor, k: Tensor, v: Tensor, w1: Tensor, w2: Tensor, scale: float
) -> Tensor:
    """TTT's SwiGLU inner model in fused Triton kernels
    (:func:`mmlvit.ops.ttt.ttt_swiglu`).

    Args:
        q, k, v (Tensor): (B, H, N, d), fp32/bf16/fp16, unit last stride.
        w1, w2 (Tensor): (1 or B, H, d, d) initial inner weights.
        scale (float): eta.

    Returns:
        Tensor: (B, H, N, d) in the dtype of q, stored (B, N, H, d) so
        that merging the heads is a view.
    """
    launch = SwiGLULaunch(q, scale)
    factor = -scale / launch.N

    def weights(k, v, w1, w2):
        r1, r2 = StepSums.apply(k, v, w1, w2, launch)
        return ClippedStep.apply(w1, r1, factor), ClippedStep.apply(
            w2, r2, factor
        )

    return OutputsOfStates.apply(q, launch, weights, k, v, w1, w2)
