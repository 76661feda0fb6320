"""Bidirectional gated linear attention, DeiT-shaped."""

import torch.nn as nn
from mmpretrain.registry import MODELS
from torch import Tensor

from mmlvit.ops.common.precision import autocast_input
from mmlvit.ops.common.recompute import recomputed
from mmlvit.ops.common.rope import apply_rope
from mmlvit.ops.gla import (
    bidirectional_gla_gated,
    bidirectional_gla_map,
    check_backend,
    gated_rms_norm,
    log_gates,
)

from .base import BaseAttention


@MODELS.register_module()
class GatedLinearAttention(BaseAttention):
    """Bidirectional GLA over image tokens (docs/operators.md, GLA).

    Keeps softmax attention's ``qkv`` (C -> 3C, d_k = d_v = d = C/h) and
    ``proj``, so a DeiT/ViT checkpoint copies in. Per head, the tokens (class
    token first, then the patches in raster order) are scanned forwards and
    backwards with data-dependent per-channel decays
    (:func:`mmlvit.ops.gla.bidirectional_gla`, scale d^-1/2)::

        [g^f | g^b] = logsigmoid(gate_up(gate_down(x))) / gate_temperature
        o = (o^f + flip(o^b)) / 2
        y = proj(concat_heads(g_norm(o)) * silu(g_proj(x)))

    with ``g_norm`` one RMSNorm over d shared by all heads. With ``rope``
    tables the patch tokens of q and k are rotated before the scans (GLA
    has no feature map; the scale d^-1/2 commutes with the rotation), so
    every backend, fused kernels included, takes the rotated q, k.

    New parameters: ``gate_down`` (C -> r, no bias), ``gate_up`` (r -> 2C;
    the first C outputs gate the forward scan, the last C the backward one),
    ``g_proj`` (C -> C, no bias, as fla's GLA layer) and ``g_norm.weight``.
    Every Linear starts from trunc_normal(std=0.02) with zero bias, so the
    gates start near alpha = 0.5^(1 / gate_temperature).

    Args:
        gate_low_rank (int): Rank r of the gate projection. Defaults to 16.
        gate_temperature (float): Divides the log-sigmoid gate logits.
            Defaults to 16.
        backend (str): ``'auto'`` (our fused Triton kernels on CUDA, the
            PyTorch scan elsewhere), ``'torch'``, ``'triton'`` or ``'fla'``,
            see :func:`~mmlvit.ops.gla.bidirectional_gla`. Defaults to
            'auto'.
        chunk_size (int): Chunk of the PyTorch scan, a power of two.
            Defaults to 64.
        **kwargs: :class:`BaseAttention`'s arguments (``embed_dims``,
            ``num_heads``, ``qkv_bias``, ``proj_drop``, ``init_cfg``).
    """

    short_name = 'gla'
    has_attention_map = True
    supports_rope = True

    def __init__(
        self,
        *args,
        gate_low_rank=16,
        gate_temperature=16.0,
        backend='auto',
        chunk_size=64,
        **kwargs,
    ):
        check_backend(backend)
        super().__init__(*args, **kwargs)
        embed_dims = self.embed_dims
        self.gate_low_rank = gate_low_rank
        self.gate_temperature = gate_temperature
        self.backend = backend
        self.chunk_size = chunk_size
        self.gate_down = nn.Linear(embed_dims, gate_low_rank, bias=False)
        self.gate_up = nn.Linear(gate_low_rank, 2 * embed_dims)
        self.g_proj = nn.Linear(embed_dims, embed_dims, bias=False)
        self.g_norm = nn.RMSNorm(self.head_dims, eps=1e-5)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def log_gates(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Forward and backward log-gates, each (B, h, N, d), <= 0.

        Computed with autocast off in at least fp32: the scans sum them over
        the sequence.
        """
        up = self.gate_up
        return self.gates_from(x, self.gate_down.weight, up.weight, up.bias)

    def gates_from(
        self,
        x: Tensor,
        down_weight: Tensor,
        up_weight: Tensor,
        up_bias: Tensor,
        chunk: int | None = None,
    ) -> tuple[Tensor, Tensor]:
        """:meth:`log_gates` from x (B, N, C) and the gate projections'
        weights given as arguments (the fused scan recomputes the gates from
        them in backward, as cumulative sums within its ``chunk``s:
        :func:`~mmlvit.ops.gla.log_gates`)."""
        return log_gates(
            x,
            down_weight,
            up_weight,
            up_bias,
            self.num_heads,
            self.gate_temperature,
            backend=self.elementwise_backend,
            chunk=chunk,
        )

    def mix_tokens(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        """(B, N, C) -> (B, N, C), N = H*W (+1 with a class token first)."""
        # One half-precision copy of x under autocast for the three
        # projections that read it and keep it for backward.
        x = autocast_input(x)
        q, k, v = self.split_heads(self.qkv(x))
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        # The gates and the output gate run in fp32 over N-sized tensors:
        # keep their inputs for backward and recompute the rest (token-wise
        # work and two C x C products, g_proj and proj, cheap beside the
        # scans).
        down, up = self.gate_down, self.gate_up
        o = bidirectional_gla_gated(
            q,
            k,
            v,
            self.gates_from,
            x,
            down.weight,
            up.weight,
            up.bias,
            backend=self.backend,
            chunk_size=self.chunk_size,
        )
        # proj too: its input is then recomputed, not kept beside o.
        return self.proj_drop(recomputed(self.gated_output, o, x))

    def gated_output(self, o: Tensor, x: Tensor) -> Tensor:
        """``proj(gated_norm(o, x))``: o (B, h, N, d), x (B, N, C) -> (B,
        N, C) in x's dtype."""
        return self.proj(self.gated_norm(o, x).to(x.dtype))

    def gated_norm(self, o: Tensor, x: Tensor) -> Tensor:
        """``merge_heads(g_norm(o)) * silu(g_proj(x))``, the norm and the
        gate in at least fp32 with autocast off (one fused kernel where the
        scan's are): o (B, h, N, d), x (B, N, C) -> (B, N, C) in the dtype
        of ``g_proj(x)``."""
        norm = self.g_norm
        return gated_rms_norm(
            o,
            self.g_proj(x),
            norm.weight,
            norm.eps,
            backend=self.elementwise_backend,
        )

    @property
    def elementwise_backend(self) -> str:
        """Backend of the token-wise steps around the scan (the log-gates,
        the output norm and gate): their fused kernels where the scan's
        run (fla's scan too), else PyTorch."""
        return 'auto' if self.backend == 'fla' else self.backend

    def flops(self, num_tokens: int, hw_shape: tuple[int, int]) -> int:
        """Forward FLOPs of the PyTorch chunked path, matrix products only
        (per head and direction: the causal half of the intra-chunk scores
        N d (L+1)/2, their product with v N L d, chunk summaries and
        inter-chunk outputs 2 N d^2 multiply-adds, L = ``chunk_size``). The
        path forms each chunk's full L x L score matrix and masks it; the
        masked half is not counted."""
        N, C, d = num_tokens, self.embed_dims, self.head_dims
        r, L = self.gate_low_rank, self.chunk_size
        output_gate = 2 * N * C * C  # g_proj
        gates = 2 * N * r * C + 2 * N * r * (2 * C)
        scans = 2 * N * C * (3 * L + 1 + 4 * d)  # 2 directions x h heads
        return self.projection_flops(N) + output_gate + gates + scans

    def compute_attention_map(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        """The combined map ``(A^f + A^b) / 2`` (q, k rotated with
        ``rope``): (B, h, N, N).

        Per head, ``attention_map(x) @ v`` equals the bidirectional scan
        output ``o`` BEFORE ``g_norm`` and the output gate; the module output
        is not a linear map of the values (the RMSNorm divides by the norm of
        ``o``). Signed and not row-normalised.
        """
        q, k, _ = self.split_heads(self.qkv(x))
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        g_fwd, g_bwd = self.log_gates(x)
        return bidirectional_gla_map(q, k, g_fwd, g_bwd)
