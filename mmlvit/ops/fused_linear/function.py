"""The fused linear attentions as an autograd Function (launch code for
:mod:`.kernels`).

Forward: one reduction launch (the state S, z, z_v of every head, in
token-range splits added up in fp32) and one output launch. Backward: one
launch for dq and the state gradients (same splits), one for dk and dv.
Saved for backward: q, k, v (views of the caller's tensors, no copies) and
the per-head fp32 state, (B, H, d_k, d_v) + (B, H, d_k) + (B, H, d_v); the
feature maps are recomputed.
"""

import torch
import triton

from . import kernels

MODES = {
    'elu': kernels.ELU,
    'relu': kernels.RELU,
    'identity': kernels.IDENTITY,
    'inline': kernels.INLINE,
}
BLOCK_N = 64  # tokens per tile
NUM_WARPS = 4
# Programs a reduction launch aims at (a few per multiprocessor): heads are
# split into token ranges until B*H*splits reaches it.
TARGET_PROGRAMS = 512


def _width(d):
    """Tile width for a head width d: a power of two, at least 16."""
    return max(16, triton.next_power_of_2(d))


def _splits(num_heads, num_tiles):
    """(splits, tiles per split) of each head's token tiles."""
    splits = min(num_tiles, -(-TARGET_PROGRAMS // num_heads))
    per_split = -(-num_tiles // splits)
    return -(-num_tiles // per_split), per_split


def _strides(t):
    """(batch, head, token) strides of a (B, H, N, d) tensor."""
    return t.stride(0), t.stride(1), t.stride(2)


def _unit_last_stride(t):
    return t if t.stride(-1) == 1 else t.contiguous()


def _empty_heads(like, width):
    """A (B, H, N, width) tensor laid out as (B, N, H, width), so merging
    the heads back into (B, N, H * width) is a view."""
    B, H, N, _ = like.shape
    return like.new_empty(B, N, H, width).transpose(1, 2)


class _Launch:
    """Shapes, tile widths and launch grids of one call."""

    def __init__(self, q, v, mode, eps, scale):
        self.B, self.H, self.N, self.DK = q.shape
        self.DV = v.shape[-1]
        self.BK, self.BV = _width(self.DK), _width(self.DV)
        self.BH = self.B * self.H
        self.tiles = triton.cdiv(self.N, BLOCK_N)
        self.splits, self.per_split = _splits(self.BH, self.tiles)
        self.mode = MODES[mode]
        self.eps = eps
        self.alpha = scale / self.N  # InLine's s/N
        self.precision = 'ieee' if q.dtype == torch.float32 else 'tf32'
        self.constants = dict(
            MODE=self.mode,
            PRECISION=self.precision,
            BLOCK_N=BLOCK_N,
            BLOCK_K=self.BK,
            BLOCK_V=self.BV,
            num_warps=NUM_WARPS,
        )

    def partials(self, device):
        """fp32 buffers for per-split S, z, z_v."""
        shape = (self.BH, self.splits)
        return (
            torch.empty(*shape, self.BK, self.BV, device=device),
            torch.empty(*shape, self.BK, device=device),
            torch.empty(*shape, self.BV, device=device),
        )


def _total(partials):
    """Add up per-split partial sums (B*H, splits, ...) -> (B*H, ...)."""
    return partials[:, 0] if partials.shape[1] == 1 else partials.sum(1)


def _state(launch, k, v):
    """S, z, z_v of every head: fp32 (B*H, BK, BV), (B*H, BK), (B*H, BV)."""
    s, z, zv = launch.partials(k.device)
    kernels.state_kernel[(launch.BH, launch.splits)](
        k, v, s, z, zv, *_strides(k), *_strides(v),
        launch.H, launch.N, launch.DK, launch.DV, launch.per_split,
        **launch.constants,
    )  # fmt: skip
    return _total(s), _total(z), _total(zv)


class FusedLinearAttention(torch.autograd.Function):
    """o = f(q, k, v) for one of :data:`MODES`; see
    :func:`fused_linear_attention`."""

    @staticmethod
    def forward(ctx, q, k, v, mode, eps, scale):
        q, k, v = map(_unit_last_stride, (q, k, v))
        launch = _Launch(q, v, mode, eps, scale)
        s, z, zv = _state(launch, k, v)
        o = _empty_heads(v, launch.DV)
        grid = (launch.BH, launch.tiles)
        kernels.output_kernel[grid](
            q, o, s, z, zv, *_strides(q), *_strides(o),
            launch.H, launch.N, launch.DK, launch.DV, eps, launch.alpha,
            MODE=launch.mode, PRECISION=launch.precision, BLOCK_N=BLOCK_N,
            BLOCK_K=launch.BK, BLOCK_V=launch.BV, num_warps=NUM_WARPS,
        )  # fmt: skip
        ctx.save_for_backward(q, k, v, s, z, zv)
        ctx.launch = launch
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, s, z, zv = ctx.saved_tensors
        launch = ctx.launch
        do = _unit_last_stride(do)
        dq = _empty_heads(q, launch.DK)
        ds, dz, dzv = launch.partials(q.device)
        kernels.query_grad_kernel[(launch.BH, launch.splits)](
            q, do, dq, s, z, zv, ds, dz, dzv,
            *_strides(q), *_strides(do), *_strides(dq),
            launch.H, launch.N, launch.DK, launch.DV, launch.eps,
            launch.alpha, launch.per_split, **launch.constants,
        )  # fmt: skip
        ds, dz, dzv = _total(ds), _total(dz), _total(dzv)
        dk, dv = _empty_heads(k, launch.DK), _empty_heads(v, launch.DV)
        kernels.key_value_grad_kernel[(launch.BH, launch.tiles)](
            k, v, dk, dv, ds, dz, dzv,
            *_strides(k), *_strides(v), *_strides(dk), *_strides(dv),
            launch.H, launch.N, launch.DK, launch.DV,
            MODE=launch.mode, PRECISION=launch.precision, BLOCK_N=BLOCK_N,
            BLOCK_K=launch.BK, BLOCK_V=launch.BV, num_warps=NUM_WARPS,
        )  # fmt: skip
        return dq, dk, dv, None, None, None


def fused_linear_attention(q, k, v, mode, eps=1e-6, scale=None):
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
        Tensor: (B, H, N, d_v) in the dtype of ``v``, stored as
        (B, N, H, d_v) so that merging the heads is a view.
    """
    if mode not in MODES:
        raise ValueError(
            f'Unknown mode {mode!r}; expected one of {list(MODES)}.'
        )
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return FusedLinearAttention.apply(q, k, v, mode, eps, scale)
