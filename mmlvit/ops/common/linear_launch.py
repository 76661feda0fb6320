"""Launch code of the fused linear attentions (:mod:`.linear_kernels`):
tile sizes, warps, token splits and grids of one call (:class:`Launch`).
The launch constants' measurements are in this folder's README.md.
"""

import torch
import triton

from . import linear_kernels as kernels
from .heads import qkv_gradients
from .triton_runtime import MANY_PROGRAMS, interpreting, num_stages

MODES = {
    'elu': kernels.ELU,
    'relu': kernels.RELU,
    'identity': kernels.IDENTITY,
    'inline': kernels.INLINE,
    'mhla': kernels.MHLA,
}
BLOCK_N = 64  # tokens per tile
# The state kernel's warps: the fewest registers a thread, no spill.
NUM_WARPS = 8
# The gradient kernels hold the state, its transpose and its gradient as
# fp32 tiles: at 8 warps they keep twice the resident warps of 4.
GRAD_NUM_WARPS = 8
# The query gradient's tiles: 32 tokens halve its registers a thread
# against 64 at about the same instructions a token.
QUERY_GRAD_BLOCK_N = 32
# Products of bf16 inputs: 'bf16' rounds their fp32 operands (feature
# maps, states) to bf16 and runs the tensor cores at full rate; bf16 has
# fp32's exponent range, so a state rounds but cannot overflow. 'tf32'
# keeps more bits at a lower rate. fp16 inputs always multiply at 'tf32'
# (a key sum can pass fp16's range), fp32 ones at 'ieee'.
BF16_PRODUCTS = 'bf16'
# The one-launch forward (:meth:`Launch.attention`) holds a head's state
# while it streams the head's tokens twice, in tiles of 32 at 8 warps.
ONE_LAUNCH_BLOCK_N = 32
ONE_LAUNCH_NUM_WARPS = 8
# The output launch runs a segment's tokens in ranges of up to 8 tiles of
# 32, its state loaded once a range.
OUTPUT_BLOCK_N = 32
OUTPUT_TILES = 8
OUTPUT_NUM_WARPS = 8
# Programs a reduction launch aims at (a few per multiprocessor, so that
# its loops copy nothing ahead: :func:`~.triton_runtime.num_stages`):
# segments are split into token ranges until B*H*SEGS*splits reaches it.
TARGET_PROGRAMS = MANY_PROGRAMS


def token_splits(tiles, programs):
    """(splits, tiles per split) of a reduction over ``tiles`` token tiles
    run by ``programs`` programs besides the split: enough splits to reach
    :data:`TARGET_PROGRAMS`, at least one tile each."""
    splits = min(tiles, -(-TARGET_PROGRAMS // programs))
    per_split = -(-tiles // splits)
    return -(-tiles // per_split), per_split


def _width(d):
    """Tile width for a head width d: a power of two, at least 16."""
    return max(16, triton.next_power_of_2(d))


def _strides(t):
    """(batch, head, token) strides of a (B, H, N, d) tensor."""
    return t.stride(0), t.stride(1), t.stride(2)


def _precision(dtype):
    """The kernels' PRECISION for inputs of ``dtype``."""
    if dtype == torch.float32:
        return 'ieee'
    if dtype == torch.float16 or BF16_PRODUCTS == 'tf32':
        return 'tf32'
    # Triton's interpreter multiplies bf16 wrongly: the same rounding,
    # fp32 products.
    return 'bf16-ieee' if interpreting() else 'bf16'


def _unit_last_stride(t):
    return t if t.stride(-1) == 1 else t.contiguous()


def _empty_heads(like, width):
    """A (B, H, N, width) tensor laid out as (B, N, H, width), so merging
    the heads back into (B, N, H * width) is a view."""
    B, H, N, _ = like.shape
    return like.new_empty(B, N, H, width).transpose(1, 2)


def _total(partials):
    """Add up per-split partial sums (B*H, SEGS, splits, ...)."""
    return partials[:, :, 0] if partials.shape[2] == 1 else partials.sum(2)


class Launch:
    """Shapes, segments, tile widths and grids of one attention call.

    Args:
        q (Tensor): (B, H, N, d_k).
        v (Tensor): (B, H, N, d_v).
        mode (str): One of :data:`MODES`.
        eps (float): The kernel modes' denominator term.
        scale (float): InLine's s.
        blocks (tuple, optional): ``(grid_h, grid_w, side)``: the N tokens
            are an H x W grid in raster order, cut into side x side blocks
            of ceil(H/side) x ceil(W/side), each a segment (MHLA). None: one
            segment.
        block_n (int): Tokens per tile. Defaults to :data:`BLOCK_N`.
    """

    def __init__(self, q, v, mode, eps, scale, blocks=None, block_n=BLOCK_N):
        self.B, self.H, self.N, self.DK = q.shape
        self.DV = v.shape[-1]
        self.BK, self.BV = _width(self.DK), _width(self.DV)
        self.BH = self.B * self.H
        if blocks is None:
            self.segs, self.seg_len = 1, self.N
            self.grid = (0, 0, 0, 0, 0)
        else:
            grid_h, grid_w, side = blocks
            block_h, block_w = -(-grid_h // side), -(-grid_w // side)
            self.segs, self.seg_len = side * side, block_h * block_w
            self.grid = (grid_h, grid_w, block_h, block_w, side)
        self.tiles = triton.cdiv(self.seg_len, block_n)
        self.splits, self.per_split = token_splits(
            self.tiles, self.BH * self.segs
        )
        # Narrower tiles of the output and query-gradient launches.
        self.output_block_n = min(block_n, OUTPUT_BLOCK_N)
        self.query_grad_block_n = min(block_n, QUERY_GRAD_BLOCK_N)
        output_tiles = triton.cdiv(self.seg_len, self.output_block_n)
        per_range = min(output_tiles, OUTPUT_TILES)
        # (ranges, tiles per range) of a segment in the output launch.
        self.output_ranges = (-(-output_tiles // per_range), per_range)
        self.eps = eps
        self.alpha = scale / self.N  # InLine's s/N
        self.grads = None  # this backward pass's dq, dk, dv slots
        self.constants = dict(
            MODE=MODES[mode],
            BLOCKED=blocks is not None,
            PRECISION=_precision(q.dtype),
            BLOCK_N=block_n,
            BLOCK_K=self.BK,
            BLOCK_V=self.BV,
            num_warps=NUM_WARPS,
        )

    @property
    def geometry(self):
        """The kernels' H, DK, DV and segment arguments."""
        return (self.H, self.DK, self.DV, self.seg_len, *self.grid)

    def gradient(self, like, slot):
        """Empty (B, H, N, d) gradient for ``like`` (q: slot 0, k: 1,
        v: 2): slots of one (B, N, 3, H, d) buffer (:func:`qkv_gradients`)
        where q, k, v are alike, so a ``qkv`` projection's gradient is
        that buffer, not a stack. Backward asks for slot 0 first (a new
        buffer each pass), then 1 and 2."""
        if slot == 0:
            alike = self.DK == self.DV
            self.grads = qkv_gradients(like) if alike else None
        grads = self.grads
        if grads is None or grads[slot].dtype != like.dtype:
            return _empty_heads(like, like.shape[-1])
        if slot == 2:
            self.grads = None
        return grads[slot]

    @property
    def one_launch(self):
        """Whether the forward runs as one launch (:meth:`attention`): one
        segment whose reduction is not split over programs."""
        return self.segs == 1 and self.splits == 1

    def attention(self, q, k, v):
        """o (B, H, N, d_v) in q's dtype, stored (B, N, H, d_v), from q, k
        and v by one program per head (:func:`kernels.attention_kernel`)."""
        q, k, v = (_unit_last_stride(t) for t in (q, k, v))
        o = _empty_heads(q, self.DV)
        tiles = triton.cdiv(self.N, ONE_LAUNCH_BLOCK_N)
        kernels.attention_kernel[(self.BH,)](
            q, k, v, o, *_strides(q), *_strides(k), *_strides(v),
            *_strides(o), self.H, self.DK, self.DV, self.N, tiles,
            self.eps, self.alpha, **self.one_launch_constants,
        )  # fmt: skip
        return o

    @property
    def one_launch_constants(self):
        """:meth:`attention`'s compile-time options."""
        options = dict(self.constants, BLOCK_N=ONE_LAUNCH_BLOCK_N)
        del options['BLOCKED']
        return dict(
            options,
            num_warps=ONE_LAUNCH_NUM_WARPS,
            num_stages=num_stages(self.BH),
        )

    def output(self, q, states):
        """o (B, H, N, d_v) in q's dtype, stored (B, N, H, d_v), from q
        and the segments' states (S, z, z_v)."""
        s, z, zv = states
        q = _unit_last_stride(q)
        o = _empty_heads(q, self.DV)
        grid = (self.BH, self.segs * self.output_ranges[0])
        kernels.output_kernel[grid](
            q, o, s, z, zv, *_strides(q), *_strides(o), *self.geometry,
            *self.output_ranges, self.eps, self.alpha,
            **self.output_constants,
        )  # fmt: skip
        return o

    def query_grads(self, q, do, states):
        """dq and the gradients of the states (S, z, z_v)."""
        s, z, zv = states
        q, do = _unit_last_stride(q), _unit_last_stride(do)
        dq = self.gradient(q, 0)
        ds, dz, dzv = self.partials(q.device)
        # The same token ranges as the state kernel's, in smaller tiles.
        per_split = self.per_split * self.constants['BLOCK_N']
        per_split //= self.query_grad_block_n
        kernels.query_grad_kernel[(self.BH, self.segs * self.splits)](
            q, do, dq, s, z, zv, ds, dz, dzv,
            *_strides(q), *_strides(do), *_strides(dq), *self.geometry,
            self.splits, per_split, self.eps, self.alpha,
            **self.query_grad_constants,
        )  # fmt: skip
        return dq, (_total(ds), _total(dz), _total(dzv))

    @property
    def state_constants(self):
        """The state kernel's compile-time options."""
        programs = self.BH * self.segs * self.splits
        return dict(self.constants, num_stages=num_stages(programs))

    @property
    def output_constants(self):
        """The output kernel's compile-time options."""
        options = dict(self.constants, BLOCK_N=self.output_block_n)
        programs = self.BH * self.segs * self.output_ranges[0]
        return dict(
            options,
            num_warps=OUTPUT_NUM_WARPS,
            num_stages=num_stages(programs),
        )

    @property
    def grad_constants(self):
        """The key-value gradient kernel's compile-time options."""
        return dict(self.constants, num_warps=GRAD_NUM_WARPS)

    @property
    def query_grad_constants(self):
        """The query-gradient kernel's compile-time options. Its loop
        copies tiles ahead at any grid (no ``num_stages``): one stage took
        as many registers and halved its resident warps."""
        return dict(self.grad_constants, BLOCK_N=self.query_grad_block_n)

    def partials(self, device):
        """fp32 buffers for per-split S, z, z_v: (B*H, SEGS, splits, ...)."""
        shape = (self.BH, self.segs, self.splits)
        return (
            torch.empty(*shape, self.BK, self.BV, device=device),
            torch.empty(*shape, self.BK, device=device),
            torch.empty(*shape, self.BV, device=device),
        )
