"""The fused linear attentions as autograd Functions (launch code:
:mod:`.linear_launch`; kernels: :mod:`.linear_kernels`).

An attention is two Functions: :class:`SegmentStates` (k, v -> the fp32
states S, z, z_v of every segment of every head) and
:class:`~.recompute.OutputsOfStates` (q and a function giving the states,
which calls SegmentStates and, for MHLA, mixes its blocks' states -> o;
:class:`~.linear_launch.Launch` runs its kernels). Each is two launches:
forward one reduction over token ranges (partial sums added up in fp32)
or one output launch, backward the matching gradient launch. Where every
head's reduction is one program anyway (one segment, enough heads to fill
the GPU: short sequences at a large batch), :class:`OneLaunchOutputs`
runs the forward as one launch, the state kept in registers.
Saved for backward: q, k, v (views of the caller's tensors, no copies);
the states (one more reduction in backward) and the feature maps are
recomputed.
"""

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from . import linear_kernels as kernels
from .linear_launch import MODES, Launch, _strides, _total, _unit_last_stride
from .recompute import OutputsOfStates
from .triton_runtime import fused_entry


class SegmentStates(torch.autograd.Function):
    """k (B, H, N, d_k), v (B, H, N, d_v) -> S (B*H, SEGS, BK, BV),
    z (B*H, SEGS, BK), z_v (B*H, SEGS, BV), fp32 (widths padded)."""

    @staticmethod
    def forward(ctx, k, v, launch):
        k, v = _unit_last_stride(k), _unit_last_stride(v)
        s, z, zv = launch.partials(k.device)
        kernels.state_kernel[(launch.BH, launch.segs * launch.splits)](
            k, v, s, z, zv, *_strides(k), *_strides(v), *launch.geometry,
            launch.splits, launch.per_split, **launch.state_constants,
        )  # fmt: skip
        ctx.save_for_backward(k, v)
        ctx.launch = launch
        return _total(s), _total(z), _total(zv)

    @staticmethod
    @once_differentiable
    def backward(ctx, ds, dz, dzv):
        k, v = ctx.saved_tensors
        launch = ctx.launch
        ds, dz, dzv = (t.float().contiguous() for t in (ds, dz, dzv))
        dk, dv = launch.gradient(k, 1), launch.gradient(v, 2)
        kernels.key_value_grad_kernel[(launch.BH, launch.segs * launch.tiles)](
            k, v, dk, dv, ds, dz, dzv,
            *_strides(k), *_strides(v), *_strides(dk), *_strides(dv),
            *launch.geometry, launch.tiles, **launch.grad_constants,
        )  # fmt: skip
        return dk, dv, None


class OneLaunchOutputs(OutputsOfStates):
    """:class:`~.recompute.OutputsOfStates` whose forward is one
    launch, :meth:`Launch.attention` on q and ``inputs`` = (k, v); the
    backward (states recomputed) is the same."""

    @staticmethod
    def forward(ctx, q, launch, states, k, v):
        ctx.save_for_backward(q, k, v)
        ctx.launch, ctx.states = launch, states
        return launch.attention(q, k, v)


@fused_entry
def fused_linear_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mode: str,
    eps: float = 1e-6,
    scale: float | None = None,
) -> Tensor:
    """Non-causal linear attention in fused Triton kernels.

    Args:
        q (Tensor): Queries (B, H, N, d_k), fp32/bf16/fp16, any strides with
            a unit last stride (e.g. a view of a ``qkv`` projection).
        k (Tensor): Keys (B, H, N, d_k).
        v (Tensor): Values (B, H, N, d_v).
        mode (str): ``'elu'``, ``'relu'``, ``'identity'`` (kernel attention
            with that feature map, normalised, ``eps`` in the denominator)
            or ``'inline'`` (InLine's subtraction normalisation).
        eps (float): The kernel modes' denominator term.
        scale (float, optional): InLine's s; defaults to d_k^-1/2.

    Returns:
        Tensor: (B, H, N, d_v) in the dtype of ``q`` (that of ``v`` too:
        the three come from one projection), stored as (B, N, H, d_v) so
        that merging the heads is a view.
    """
    if mode not in MODES or mode == 'mhla':
        raise ValueError(
            f'Unknown mode {mode!r}; expected one of '
            f'{[m for m in MODES if m != "mhla"]}.'
        )
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    launch = Launch(q, v, mode, eps, scale)

    def states(k, v):
        return SegmentStates.apply(k, v, launch)

    outputs = OneLaunchOutputs if launch.one_launch else OutputsOfStates
    return outputs.apply(q, launch, states, k, v)
