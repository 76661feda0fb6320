"""Test-time-training inner models of the ViT^3 block (Han et al. 2026),
in PyTorch: the reference and the CPU path.

Each image fits two inner models to its own key-value pairs with one
closed-form gradient step from the learned weights, then applies them to its
queries:

- SwiGLU head, per head: f(k) = (k W1) * silu(k W2), inner loss
  L = -(eta / N) sum_t <f(k_t), v_t>.
- Depthwise 3x3 conv head on the patch grid: f(k) = dwconv3x3(k; W3) (zero
  padding 1, no bias), L = -(eta / (H*W)) sum <f(k), v>.

The step is W' = W - G / (||G|| + 1), the norm over the input axis of W1, W2
and over the 3x3 taps of each channel of W3; learning rate 1.
"""

import torch
import torch.nn.functional as F
from torch import Tensor

from ..common.precision import fp32_accumulation

TTT_INNER_SCALE = 9**-0.5


def swiglu_inner_grads(
    k: Tensor,
    v: Tensor,
    w1: Tensor,
    w2: Tensor,
    scale: float = TTT_INNER_SCALE,
) -> tuple[Tensor, Tensor]:
    """Gradients of the SwiGLU inner loss w.r.t. W1 and W2, in closed form.

    With Z1 = k W1, Z2 = k W2, s = sigmoid(Z2) and E = -scale * v / N:
    G1 = k^T (E * Z2 s), G2 = k^T (E * Z1 * s (1 + Z2 (1 - s))).

    Args:
        k, v (Tensor): (B, h, N, d).
        w1, w2 (Tensor): (1 or B, h, d, d), input axis first.
        scale (float): eta. Defaults to 9^-1/2.

    Returns:
        tuple[Tensor]: G1, G2, each (B, h, d, d).
    """
    z1, z2 = _swiglu_inputs(k, w1, w2)
    gate = torch.sigmoid(z2)
    silu = z2 * gate
    silu_grad = torch.addcmul(gate, silu, 1 - gate)  # s (1 + Z2 (1 - s))
    keys = k.transpose(-2, -1)
    # The scalar factor of E goes on the small (d, d) results.
    factor = -scale / k.shape[-2]
    g1 = (keys @ (v * silu)) * factor
    g2 = (keys @ (v * z1 * silu_grad)) * factor
    return g1, g2


def _swiglu_inputs(x, w1, w2):
    """x W1 and x W2 as one product: (..., N, d) each."""
    return (x @ torch.cat([w1, w2], dim=-1)).chunk(2, dim=-1)


def _taps(x):
    """The 9 shifted views of a zero-padded 3x3 neighbourhood, row-major:
    tap (a, b) of (B, d, H, W) ``x`` is ``x_pad[..., a:a + H, b:b + W]``."""
    H, W = x.shape[-2:]
    padded = F.pad(x, (1, 1, 1, 1))
    return [
        padded[..., a : a + H, b : b + W] for a in range(3) for b in range(3)
    ]


def dwconv_inner_grad(
    k: Tensor, v: Tensor, scale: float = TTT_INNER_SCALE
) -> Tensor:
    """Gradient of the depthwise-conv inner loss w.r.t. the 3x3 kernel.

    G[c, a, b] = sum_{y, x} k_pad[c, y + a, x + b] E[c, y, x] with
    E = -scale * v / (H*W). The loss is linear in W3, so G does not depend
    on it. Nine token-wise products and sums (no per-sample convolution,
    whose B*d groups are slow on GPUs).

    Args:
        k, v (Tensor): (B, d, H, W).
        scale (float): eta. Defaults to 9^-1/2.

    Returns:
        Tensor: (B, d, 3, 3).
    """
    B, d, H, W = k.shape
    error = v * (-scale / (H * W))
    taps = [(tap * error).sum((-2, -1)) for tap in _taps(k)]
    return torch.stack(taps, dim=-1).reshape(B, d, 3, 3)


def normalised(grad, dim):
    """The clipped step ``G / (||G|| + 1)``, the norm over ``dim``."""
    return grad / (grad.norm(dim=dim, keepdim=True) + 1)


@fp32_accumulation(result_dtype_of='q')
def ttt_swiglu_reference(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    w1: Tensor,
    w2: Tensor,
    scale: float = TTT_INNER_SCALE,
) -> Tensor:
    """SwiGLU inner model: one step on (k, v), then applied to q.

    Runs in float32 (float64 for float64 inputs) with autocast off; the
    result is cast back to ``q.dtype``.

    Args:
        q, k, v (Tensor): (B, h, N, d).
        w1, w2 (Tensor): (1, h, d, d) learned initial inner weights.
        scale (float): eta. Defaults to 9^-1/2.

    Returns:
        Tensor: (B, h, N, d) = (q W1') * silu(q W2').
    """
    q, k, v = (t.contiguous() for t in (q, k, v))
    g1, g2 = swiglu_inner_grads(k, v, w1, w2, scale)
    w1 = w1 - normalised(g1, dim=-2)
    w2 = w2 - normalised(g2, dim=-2)
    z1, z2 = _swiglu_inputs(q, w1, w2)
    return z1 * F.silu(z2)


@fp32_accumulation(result_dtype_of='q')
def ttt_dwconv_reference(
    q: Tensor, k: Tensor, v: Tensor, w3: Tensor, scale: float = TTT_INNER_SCALE
) -> Tensor:
    """Depthwise 3x3 conv inner model: one step on (k, v), applied to q.

    Runs in float32 (float64 for float64 inputs) with autocast off; the
    result is cast back to ``q.dtype``.

    Args:
        q, k, v (Tensor): (B, d, H, W) on the patch grid.
        w3 (Tensor): (d, 1, 3, 3) learned initial kernel.
        scale (float): eta. Defaults to 9^-1/2.

    Returns:
        Tensor: (B, d, H, W) = dwconv3x3(q; W3'), W3' per sample.
    """
    d = q.shape[1]
    grad = dwconv_inner_grad(k, v, scale)
    w3 = w3.reshape(1, d, 3, 3) - normalised(grad, dim=(-2, -1))
    return _dwconv3x3(q, w3)


def _dwconv3x3(x, weight):
    """``dwconv3x3(x; weight)`` with a kernel per sample, zero padding 1,
    no bias, as nine token-wise multiply-adds: no grouped convolution of
    B*d groups (slow on GPUs, and a group count an exported graph cannot
    take from a dynamic batch size).

    Args:
        x (Tensor): (B, d, H, W).
        weight (Tensor): (B, d, 3, 3).

    Returns:
        Tensor: (B, d, H, W).
    """
    taps = weight.flatten(-2)[..., None, None]  # (B, d, 9, 1, 1)
    out = None
    for i, tap in enumerate(_taps(x)):
        term = tap * taps[:, :, i]
        out = term if out is None else out + term
    return out
