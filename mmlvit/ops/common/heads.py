"""Splitting a ``qkv`` projection into heads without a gradient copy.

``qkv.reshape(B, N, 3, h, d).permute(2, 0, 3, 1, 4)`` unbound into q, k, v
costs a (B, N, 3C) ``stack`` of dq, dk, dv in backward. The fused kernels
write their gradients straight into one (B, N, 3, h, d) buffer
(:func:`qkv_gradients`), and :class:`SplitQKV` hands that buffer back as
the gradient of ``qkv`` as it is (with dv copied in where v's gradient
had another term added); gradients that arrive in separate tensors are
stacked as before.
"""

import torch

from .tracing import exporting


def qkv_gradients(q: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """dq, dk, dv for q, k, v (B, h, N, d) of one projection: views
    (B, h, N, d) of one new (B, N, 3, h, d) buffer, in q's dtype, slots
    0, 1, 2 -- the layout :class:`SplitQKV` passes on without a copy."""
    B, h, N, d = q.shape
    buffer = q.new_empty(B, N, 3, h, d)
    return tuple(buffer[:, :, i].transpose(1, 2) for i in range(3))


def common_buffer(*grads):
    """The (B, N, 3, h, d) tensor whose first ``len(grads)`` slots the
    (B, h, N, d) ``grads`` are (dq, dk, dv as :func:`qkv_gradients` lays
    them out, or the first of them), or None."""
    base = grads[0]._base
    if base is None or any(g._base is not base for g in grads):
        return None
    B, h, N, d = grads[0].shape
    if base.shape != (B, N, 3, h, d) or not base.is_contiguous():
        return None
    slot = h * d * base.element_size()
    for i, g in enumerate(grads):
        if g.data_ptr() != base.data_ptr() + i * slot:
            return None
        if g.stride() != (N * 3 * h * d, d, 3 * h * d, 1):
            return None
    return base


class SplitQKV(torch.autograd.Function):
    """(B, N, 3, h, d) -> q, k, v (B, h, N, d) views; backward passes a
    common gradient buffer on as it is, else stacks.

    Where only dq and dk are slots of one (a kernel wrote all three, and
    v's gradient then had another term added, e.g. MHLA's value conv),
    dv is copied into the third slot, whose own gradient went into that
    sum and is not read again: one copy of dv instead of a stack of all
    three."""

    @staticmethod
    def forward(ctx, qkv):
        return tuple(qkv[:, :, i].transpose(1, 2) for i in range(3))

    @staticmethod
    def backward(ctx, dq, dk, dv):
        base = common_buffer(dq, dk, dv)
        if base is not None:
            return base
        base = common_buffer(dq, dk)
        if base is not None and base.dtype == dv.dtype:
            base[:, :, 2].copy_(dv.transpose(1, 2))
            return base
        return torch.stack([g.transpose(1, 2) for g in (dq, dk, dv)], dim=2)


def split_qkv(qkv: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """q, k, v (B, h, N, d) of ``qkv`` (B, N, 3, h, d).

    In training, through :class:`SplitQKV` (no gradient copy where the
    kernels share a buffer); while exporting or compiling, or without
    gradients, plain views (the same function)."""
    plain = (
        not (torch.is_grad_enabled() and qkv.requires_grad)
        or exporting()
        or torch.compiler.is_compiling()
    )
    if plain:
        return tuple(qkv[:, :, i].transpose(1, 2) for i in range(3))
    return SplitQKV.apply(qkv)
