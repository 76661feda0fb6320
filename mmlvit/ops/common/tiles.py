"""Triton helpers over one head's token tiles, shared by every fused
kernel: token ranges, strided (B, H, N, d) addressing, masked fp32 loads
and stores in the pointer's dtype, and products at a chosen precision."""

import triton
import triton.language as tl


@triton.jit
def _range_tokens(split, t, tiles_per_split, N, BLOCK_N: tl.constexpr):
    """Token indices of tile ``t`` of a split's range of N, and which exist."""
    idx = (split * tiles_per_split + t) * BLOCK_N + tl.arange(0, BLOCK_N)
    return idx, idx < N


@triton.jit
def _offsets(stride_b, stride_h, stride_n, bh, H, tokens, cols):
    b = bh // H
    h = bh % H
    return (
        b.to(tl.int64) * stride_b
        + h.to(tl.int64) * stride_h
        + tokens[:, None].to(tl.int64) * stride_n
        + cols[None, :]
    )


@triton.jit
def _tile(ptr, stride_b, stride_h, stride_n, bh, H, tokens, valid, cols, D):
    """Load the (tokens, cols) tile of head ``bh`` as fp32, zero outside."""
    offsets = _offsets(stride_b, stride_h, stride_n, bh, H, tokens, cols)
    mask = valid[:, None] & (cols[None, :] < D)
    return tl.load(ptr + offsets, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _store(
    ptr, stride_b, stride_h, stride_n, bh, H, tokens, valid, cols, D, x
):  # fmt: skip
    """Store the fp32 tile ``x`` into head ``bh`` in the pointer's dtype."""
    offsets = _offsets(stride_b, stride_h, stride_n, bh, H, tokens, cols)
    mask = valid[:, None] & (cols[None, :] < D)
    tl.store(ptr + offsets, x.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr):
    """a @ b of fp32 tiles, fp32 accumulation: products at 'ieee' or
    'tf32' precision, or of operands rounded to 'bf16' (tensor cores at
    full rate); 'bf16-ieee' rounds to bf16 and multiplies in fp32 (the
    same numbers where bf16 products are unavailable, as under Triton's
    interpreter)."""
    if PRECISION == 'bf16':
        return tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    elif PRECISION == 'bf16-ieee':
        a = a.to(tl.bfloat16).to(tl.float32)
        b = b.to(tl.bfloat16).to(tl.float32)
        return tl.dot(a, b, input_precision='ieee')
    else:
        return tl.dot(a, b, input_precision=PRECISION)
