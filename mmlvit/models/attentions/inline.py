"""InLine attention: identity kernel, subtraction normalisation."""

from mmpretrain.registry import MODELS
from torch import Tensor

from mmlvit.ops import inline_attention, inline_attention_map
from mmlvit.ops.common.dispatch import check_backend
from mmlvit.ops.common.rope import apply_rope

from .base import BaseAttention


@MODELS.register_module()
class InLineAttention(BaseAttention):
    """InLine attention (Han et al., NeurIPS 2024) without the local
    residual branch, as in Qin et al. B.1.

    ``o_i = (s/N) q_i (k^T v) + (1 - s q_i . mean(k)) mean(v)`` per head,
    s = d^-1/2, every token (class token included) counted in N. Holds only
    the softmax parameters (``qkv``, ``proj``).

    With ``rope`` tables the patch tokens of q and k are rotated before the
    formula (the kernel is the identity, so the map
    ``(s/N) (R q_i).(R k_j) + (1/N)(1 - s (R q_i) . mean(R k))`` keeps rows
    that sum to 1); the rotated q, k take any backend, fused kernels
    included.

    Args:
        backend (str): ``'auto'`` (fused Triton kernels on CUDA, PyTorch
            elsewhere), ``'triton'`` or ``'torch'``, see
            :func:`mmlvit.ops.inline_attention`. Defaults to 'auto'.
        **kwargs: :class:`BaseAttention`'s arguments.
    """

    short_name = 'inline'
    has_attention_map = True
    output_is_map_times_values = True
    supports_rope = True

    def __init__(self, *args, backend='auto', **kwargs):
        check_backend(backend)
        super().__init__(*args, **kwargs)
        self.backend = backend

    def mix_tokens(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        """(B, N, C) -> (B, N, C), N = H*W (+1 with a class token)."""
        q, k, v = self.split_heads(self.qkv(x))
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        o = inline_attention(q, k, v, backend=self.backend)
        return self.output(self.merge_heads(o))

    def flops(self, num_tokens: int, hw_shape: tuple[int, int]) -> int:
        N, C, d = num_tokens, self.embed_dims, self.head_dims
        summaries = 2 * N * C * d + 2 * N * C  # k^T v, mean(k), mean(v)
        outputs = 2 * N * C * d + 2 * N * C + 2 * N * C  # q(k^T v), offset
        return self.projection_flops(N) + summaries + outputs

    def compute_attention_map(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        """(s/N) q k^T + (1/N)(1 - s q . mean(k)) (q, k rotated with
        ``rope``): (B, h, N, N), signed, rows summing to 1."""
        q, k, _ = self.split_heads(self.qkv(x))
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        return inline_attention_map(q, k)
