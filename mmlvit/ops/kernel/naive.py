"""Non-causal phi-kernel linear attention (Katharopoulos et al., 2020).

For one head with queries, keys, values q, k, v (N x d) and a positive
feature map phi::

    S = phi(k)^T v                      (d x d, the key-value summary)
    z = phi(k)^T 1                      (d, the normaliser)
    o_i = phi(q_i) S / (phi(q_i) . z + eps)

which equals ``A v`` for the row-normalised map
``A = diag(phi(q) phi(k)^T 1 + eps)^-1 phi(q) phi(k)^T`` in O(N d^2) time
and O(N d + d^2) memory. No scale is applied to q or k (the reference
implementation applies phi to the raw projections).
"""

import torch.nn.functional as F
from torch import Tensor

from ..common.precision import fp32_accumulation


def _elu_plus_one(x):
    return F.elu(x) + 1


FEATURE_MAPS = {
    'elu': _elu_plus_one,
    'relu': F.relu,
    'identity': lambda x: x,
}


def check_kernel(kernel: str) -> None:
    """Raise a ValueError naming the kernels unless ``kernel`` is one."""
    if kernel not in FEATURE_MAPS:
        raise ValueError(
            f'Unknown kernel {kernel!r}; expected one of '
            f'{sorted(FEATURE_MAPS)}.'
        )


def feature_map(x: Tensor, kernel: str) -> Tensor:
    """Apply the kernel feature map phi elementwise.

    Args:
        x (Tensor): Any shape.
        kernel (str): ``'elu'`` (elu(x) + 1 > 0), ``'relu'`` (max(x, 0)) or
            ``'identity'``.

    Returns:
        Tensor: phi(x), same shape and dtype as ``x``.
    """
    check_kernel(kernel)
    return FEATURE_MAPS[kernel](x)


@fp32_accumulation(result_dtype_of='q')
def kernel_attention_map(
    q: Tensor, k: Tensor, kernel: str = 'elu', eps: float = 1e-6
) -> Tensor:
    """The (B, h, N, N) map that
    :func:`~.dispatch.kernel_linear_attention` applies to the values:
    ``diag(phi(q) phi(k)^T 1 + eps)^-1 phi(q) phi(k)^T``.

    O(N^2) memory, for analysis and map matching only. Computed in at least
    fp32 with autocast off and cast back to the dtype of ``q``.

    Args:
        q (Tensor): Queries (B, h, N, d).
        k (Tensor): Keys (B, h, N, d).
        kernel (str): Feature map, see :func:`feature_map`.
        eps (float): Added to the row sums.

    Returns:
        Tensor: (B, h, N, N); for positive kernels each row is a
        distribution (up to eps), ReLU rows may be all zero.
    """
    scores = feature_map(q, kernel) @ feature_map(k, kernel).transpose(-2, -1)
    return scores / (scores.sum(dim=-1, keepdim=True) + eps)
