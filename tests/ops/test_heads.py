"""split_qkv's backward: the gradient of qkv is the kernels' buffer where
dq, dk, dv are its slots, that buffer with dv copied in where only dq and
dk are, a stack otherwise (mmlvit.ops.common.heads)."""

import torch

from mmlvit.ops.common.heads import qkv_gradients, split_qkv

B, N, H, D = 2, 5, 3, 4


class KernelLike(torch.autograd.Function):
    """q, k, v -> q + 2k + 3v, whose backward writes dq, dk, dv into one
    buffer (:func:`qkv_gradients`) as the fused kernels do, and keeps it
    in ``buffers``."""

    buffers = []

    @staticmethod
    def forward(ctx, q, k, v):
        return q + 2 * k + 3 * v

    @staticmethod
    def backward(ctx, grad):
        grads = qkv_gradients(grad)
        for i, g in enumerate(grads):
            g.copy_(grad * (i + 1))
        KernelLike.buffers.append(grads[0]._base)
        return grads


def qkv_grad(output_of):
    """The gradient of a (B, N, 3, H, D) qkv through ``output_of(q, k,
    v)`` summed, as split_qkv's backward returns it."""
    leaf = torch.randn(B, N, 3, H, D, requires_grad=True)
    qkv, seen = leaf * 1, []
    qkv.register_hook(seen.append)
    output_of(*split_qkv(qkv)).sum().backward()
    return seen.pop()


def slots(q, k, v):
    """(B, N, 3, H, D) gradient with the values q, k, v in the slots."""
    return torch.ones(B, N, 3, H, D) * torch.tensor([q, k, v])[:, None, None]


def test_a_common_buffer_is_the_gradient_as_it_is():
    grad = qkv_grad(KernelLike.apply)
    torch.testing.assert_close(grad, slots(1.0, 2.0, 3.0))
    assert grad.data_ptr() == KernelLike.buffers.pop().data_ptr()


def test_dv_with_another_term_is_copied_into_the_buffer():
    """v also feeds a second branch (as MHLA's value conv does): dv = 3 +
    5 goes into the buffer's third slot; the buffer is the gradient, no
    stack of all three."""
    grad = qkv_grad(lambda q, k, v: KernelLike.apply(q, k, v) + 5 * v)
    torch.testing.assert_close(grad, slots(1.0, 2.0, 8.0))
    assert grad.data_ptr() == KernelLike.buffers.pop().data_ptr()


def test_separate_gradients_are_stacked():
    grad = qkv_grad(lambda q, k, v: q + 2 * k + 3 * v)
    torch.testing.assert_close(grad, slots(1.0, 2.0, 3.0))
