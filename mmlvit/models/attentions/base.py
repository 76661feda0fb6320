"""The skeleton every attention operator shares with softmax attention."""

import torch.nn as nn
from mmengine.model import BaseModule
from mmpretrain.registry import MODELS
from torch import Tensor

from mmlvit.ops.common.heads import split_qkv


class BaseAttention(BaseModule):
    """Multi-head token mixing with softmax-compatible parameter names.

    Every operator owns ``qkv`` (Linear C -> 3C + :meth:`extra_qkv_dims`;
    the standard q, k, v rows first, head ``i`` at rows ``i*d:(i+1)*d`` of
    each) and ``proj`` (Linear :meth:`proj_in_dims` -> C), so checkpoint
    keys line up with mmpretrain's ``MultiheadAttention`` and copying is by
    name and shape.

    A subclass implements :meth:`mix_tokens` (and, where the operator has an
    N x N map, :meth:`compute_attention_map`) and states its capabilities in
    the class attributes below; the backbone, the tests, the benchmarks and
    the tools read them (and enumerate :func:`registered_operators`), so a
    new operator touches only its own file plus one import line.

    Args:
        embed_dims (int): Token width C.
        num_heads (int): Number of heads h; must divide C.
        qkv_bias (bool): Bias in ``qkv``. Defaults to True.
        attn_drop (float): Dropout on the attention map. Only operators that
            apply an explicit map (``drops_attention_map``) accept a non-zero
            value. Defaults to 0.
        proj_drop (float): Dropout after ``proj``. Defaults to 0.
        init_cfg (dict, optional): mmengine init config.

    Class attributes (capabilities):
        short_name (str): Lower-case name used by tools and in config file
            names (``'gla'`` for ``GatedLinearAttention``).
        linear_cost (bool): Cost grows linearly with the token count N.
        patch_tokens_only (bool): The operator mixes the H*W patches only:
            a backbone using it has no class token (and by default pools
            the patches and uses fixed sin-cos positions).
        has_attention_map (bool): :meth:`attention_map` returns the
            (B, h, N, N) map the operator applies to the values.
        output_is_map_times_values (bool): The forward output is exactly
            ``proj(concat_heads(attention_map @ v))``.
        drops_attention_map (bool): The operator applies an explicit map in
            its forward, so ``attn_drop`` may be non-zero.
        supports_rope (bool): The operator applies rotary position
            embedding: :meth:`forward` and :meth:`attention_map` take
            ``rope`` tables (:class:`~mmlvit.ops.common.rope.RopeTables`)
            and :meth:`mix_tokens` accepts them as ``rope=``. A backbone
            with ``rope_cfg`` refuses an operator without it.

    Instance attribute ``prefix_tokens`` (int, optional): how many tokens
    precede the patches (class, distillation, registers); the backbone
    that builds the operator sets it, so a token count that does not fit
    the grid is refused. Unset (None): 0, 1 or 2.
    """

    short_name = None
    linear_cost = True
    patch_tokens_only = False
    has_attention_map = False
    output_is_map_times_values = False
    drops_attention_map = False
    supports_rope = False
    prefix_tokens = None

    def __init__(
        self,
        embed_dims,
        num_heads,
        qkv_bias=True,
        attn_drop=0.0,
        proj_drop=0.0,
        init_cfg=None,
    ):
        super().__init__(init_cfg=init_cfg)
        if attn_drop and not self.drops_attention_map:
            raise ValueError(
                f'{type(self).__name__} forms no attention map to drop from; '
                f'attn_drop must be 0, got {attn_drop}.'
            )
        if embed_dims % num_heads != 0:
            raise ValueError(
                f'{type(self).__name__}: num_heads={num_heads} must divide '
                f'embed_dims={embed_dims}.'
            )
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.attn_drop = attn_drop
        self.qkv = nn.Linear(
            embed_dims,
            3 * embed_dims + self.extra_qkv_dims(embed_dims, num_heads),
            bias=qkv_bias,
        )
        self.proj = nn.Linear(
            self.proj_in_dims(embed_dims, num_heads), embed_dims
        )
        self.proj_drop = nn.Dropout(proj_drop)

    @classmethod
    def extra_qkv_dims(cls, embed_dims: int, num_heads: int) -> int:
        """Rows ``qkv`` has after the 3C standard ones (0: none)."""
        return 0

    @classmethod
    def proj_in_dims(cls, embed_dims: int, num_heads: int) -> int:
        """Input width of ``proj`` (C: softmax's shape)."""
        return embed_dims

    def split_heads(self, qkv: Tensor) -> tuple[Tensor, ...]:
        """Split the standard rows of a ``qkv`` output into heads.

        Args:
            qkv (Tensor): (B, N, 3C + extra) output of ``self.qkv``.

        Returns:
            tuple[Tensor]: q, k, v, each (B, h, N, d).
        """
        B, N, _ = qkv.shape
        C = self.embed_dims
        shape = (B, N, 3, self.num_heads, self.head_dims)
        heads = qkv[..., : 3 * C].reshape(shape)
        return split_qkv(heads)

    def merge_heads(self, x: Tensor) -> Tensor:
        """(B, h, N, d) -> (B, N, h*d)."""
        B, h, N, d = x.shape
        return x.transpose(1, 2).reshape(B, N, h * d)

    def output(self, x: Tensor) -> Tensor:
        """Output projection and dropout: (B, N, proj_in_dims) -> (B, N, C)."""
        return self.proj_drop(self.proj(x))

    def num_extra_tokens(
        self, num_tokens: int, hw_shape: tuple[int, int]
    ) -> int:
        """How many tokens (the class token, a distilled DeiT's
        distillation token, registers) precede the H*W patches.

        Raises:
            ValueError: ``num_tokens`` is not H*W plus ``prefix_tokens``
                (0, 1 or 2 when unset), or there are tokens before the
                patches and the operator mixes patches only.
        """
        H, W = hw_shape
        extra = num_tokens - H * W
        allowed = (
            (0, 1, 2) if self.prefix_tokens is None else (self.prefix_tokens,)
        )
        if extra not in allowed:
            counts = ' or '.join(str(H * W + p) for p in allowed)
            raise ValueError(
                f'Got {num_tokens} tokens for a {H}x{W} patch grid; expected '
                f'the {H * W} patches after {" or ".join(map(str, allowed))} '
                f'tokens (class, distillation, registers), i.e. {counts}.'
            )
        if extra and self.patch_tokens_only:
            raise ValueError(
                f'{type(self).__name__} mixes patch tokens only and got '
                f'{extra} tokens before the patches (a class token, a '
                'distillation token or registers); build the backbone with '
                'with_cls_token=False and num_register_tokens=0.'
            )
        return extra

    def forward(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        """Mix tokens.

        Args:
            x (Tensor): (B, N, C) tokens, the class token (if any) first,
                then the H*W patches in raster order.
            hw_shape (tuple[int, int]): Patch grid (H, W).
            rope (RopeTables, optional): Rotary tables of the grid, for an
                operator with ``supports_rope``; None: no rotation.

        Returns:
            Tensor: (B, N, C).

        Raises:
            ValueError: N does not fit the grid (see
                :meth:`num_extra_tokens`).
        """
        self.num_extra_tokens(x.shape[1], hw_shape)
        if rope is None:
            return self.mix_tokens(x, hw_shape)
        self._check_rope()
        return self.mix_tokens(x, hw_shape, rope=rope)

    def _check_rope(self):
        if not self.supports_rope:
            raise ValueError(
                f'{type(self).__name__} cannot apply rotary position '
                'embedding (supports_rope is False); use an operator that '
                'does or build the backbone without rope_cfg.'
            )

    def mix_tokens(self, x: Tensor, hw_shape: tuple[int, int]) -> Tensor:
        """The operator itself, on tokens already checked against the grid:
        (B, N, C) -> (B, N, C)."""
        raise NotImplementedError

    def projection_flops(self, num_tokens: int) -> int:
        """Forward FLOPs of ``qkv`` and ``proj`` for one image (2 per
        multiply-add)."""
        return (
            2
            * num_tokens
            * (
                self.qkv.in_features * self.qkv.out_features
                + self.proj.in_features * self.proj.out_features
            )
        )

    def flops(self, num_tokens: int, hw_shape: tuple[int, int]) -> int:
        """Forward FLOPs for one image (2 per multiply-add), projections
        included; used by the benchmarks to compare measured speed-ups with
        the arithmetic ones."""
        raise NotImplementedError

    def attention_map(
        self, x: Tensor, hw_shape: tuple[int, int], rope=None
    ) -> Tensor:
        """The (B, h, N, N) map applied to the values, for analysis only
        (with ``rope``, as :meth:`forward`).

        Raises:
            NotImplementedError: The operator has no such map
                (``has_attention_map`` is False).
        """
        if not self.has_attention_map:
            raise NotImplementedError(
                f'{type(self).__name__} never forms an N x N attention map: '
                'its output is not a fixed linear map of the values. Use an '
                'output-based analysis (e.g. AttentionOutputMSE) instead.'
            )
        self.num_extra_tokens(x.shape[1], hw_shape)
        if rope is None:
            return self.compute_attention_map(x, hw_shape)
        self._check_rope()
        return self.compute_attention_map(x, hw_shape, rope=rope)

    def compute_attention_map(
        self, x: Tensor, hw_shape: tuple[int, int]
    ) -> Tensor:
        """The map of an operator with ``has_attention_map``, on tokens
        already checked against the grid: (B, h, N, N)."""
        raise NotImplementedError


def registered_operators(linear_cost: bool | None = None) -> dict[str, type]:
    """Every attention operator in mmpretrain's ``MODELS`` registry.

    Args:
        linear_cost (bool, optional): Keep only the operators whose
            ``linear_cost`` is this (True: the linear-attention operators).

    Returns:
        dict[str, type]: Registry name -> :class:`BaseAttention` subclass,
        sorted by name. Operators registered later (by a plugin or a test
        module) are included from then on.
    """
    return {
        name: module
        for name, module in sorted(MODELS.module_dict.items())
        if isinstance(module, type)
        and issubclass(module, BaseAttention)
        and linear_cost in (None, module.linear_cost)
    }
