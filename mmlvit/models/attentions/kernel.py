"""Kernel linear attention: ELU+1 and ReLU feature maps."""

from mmpretrain.registry import MODELS
from torch import Tensor

from mmlvit.ops import kernel_attention_map, kernel_linear_attention
from mmlvit.ops.common.dispatch import check_backend
from mmlvit.ops.kernel import (
    kernel_attention_map_rope,
    kernel_linear_attention_rope,
)

from .base import BaseAttention


class KernelLinearAttention(BaseAttention):
    """Non-causal linear attention ``phi(q) (phi(k)^T v) / (phi(q) . z)``.

    Holds only the softmax parameters (``qkv``, ``proj``), so a softmax
    checkpoint copies in unchanged. q and k are not scaled; the class token,
    if any, is an ordinary token. Subclasses fix the feature map ``kernel``.

    With ``rope`` tables (RoFormer, arXiv 2104.09864, section 3.4.4) the
    feature-mapped patch queries and keys are rotated in the numerator and
    the normaliser stays unrotated::

        o_i = sum_j [R_i phi(q_i)]^T [R_j phi(k_j)] v_j
              / (sum_j phi(q_i)^T phi(k_j) + eps)

    This runs the PyTorch path whatever ``backend`` says: the fused kernels
    take no rotation (:func:`mmlvit.ops.kernel.kernel_linear_attention_rope`).

    Args:
        eps (float): Added to the normaliser. Defaults to 1e-6.
        backend (str): ``'auto'`` (fused Triton kernels on CUDA, PyTorch
            elsewhere), ``'triton'`` or ``'torch'``, see
            :func:`mmlvit.ops.kernel_linear_attention`. Defaults to 'auto'.
        **kwargs: :class:`BaseAttention`'s arguments (``embed_dims``,
            ``num_heads``, ``qkv_bias``, ``proj_drop``, ``init_cfg``).
    """

    has_attention_map = True
    output_is_map_times_values = True
    supports_rope = True
    kernel = None

    def __init__(self, *args, eps=1e-6, backend='auto', **kwargs):
        check_backend(backend)
        super().__init__(*args, **kwargs)
        self.eps = eps
        self.backend = backend

    def mix_tokens(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        """(B, N, C) -> (B, N, C), N = H*W (+1 with a class token)."""
        q, k, v = self.split_heads(self.qkv(x))
        if rope is not None:
            o = kernel_linear_attention_rope(
                q, k, v, rope, kernel=self.kernel, eps=self.eps
            )
            return self.output(self.merge_heads(o))
        o = kernel_linear_attention(
            q, k, v, kernel=self.kernel, eps=self.eps, backend=self.backend
        )
        return self.output(self.merge_heads(o))

    def flops(self, num_tokens: int, hw_shape: tuple[int, int]) -> int:
        N, C, d = num_tokens, self.embed_dims, self.head_dims
        summaries = 2 * N * C * d + N * C  # phi(k)^T v and z
        outputs = 2 * N * C * d + 2 * N * C + N * C  # numerator, den., div.
        return self.projection_flops(N) + summaries + outputs

    def compute_attention_map(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        """diag(phi(q) phi(k)^T 1 + eps)^-1 phi(q) phi(k)^T: (B, h, N, N)
        (with ``rope``, the numerator's features rotated)."""
        q, k, _ = self.split_heads(self.qkv(x))
        if rope is not None:
            return kernel_attention_map_rope(
                q, k, rope, kernel=self.kernel, eps=self.eps
            )
        return kernel_attention_map(q, k, kernel=self.kernel, eps=self.eps)


@MODELS.register_module()
class ELULinearAttention(KernelLinearAttention):
    """Kernel linear attention with phi(x) = elu(x) + 1. Arguments as
    :class:`KernelLinearAttention`."""

    short_name = 'elu'
    kernel = 'elu'


@MODELS.register_module()
class ReLULinearAttention(KernelLinearAttention):
    """Kernel linear attention with phi(x) = relu(x); rows whose keys and
    query share no positive feature give a zero output. Arguments as
    :class:`KernelLinearAttention`."""

    short_name = 'relu'
    kernel = 'relu'
