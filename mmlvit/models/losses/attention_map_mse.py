"""Attention-map distillation, the paper's map-matching ablation."""

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmpretrain.models.utils import MultiheadAttention
from mmpretrain.registry import MODELS
from torch.utils.checkpoint import checkpoint

from ..attentions import BaseAttention, registered_operators
from .distill_base import BlockwiseDistillLoss

if TYPE_CHECKING:
    from mmlvit.models.distillers import AttentionRecording


def softmax_attention_map(
    attn: MultiheadAttention, x: torch.Tensor
) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) of an mmpretrain ``MultiheadAttention``.

    Args:
        attn (MultiheadAttention): Owns ``qkv`` (input -> 3C) and
            ``num_heads``.
        x (Tensor): (B, N, C_in) input of ``attn``.

    Returns:
        Tensor: (B, h, N, N), rows sum to 1.
    """
    B, N, _ = x.shape
    q, k, _ = (
        attn.qkv(x)
        .reshape(B, N, 3, attn.num_heads, attn.head_dims)
        .permute(2, 0, 3, 1, 4)
    )
    return torch.softmax(
        q @ k.transpose(-2, -1) * attn.head_dims**-0.5, dim=-1
    )


def attention_map(attn: nn.Module, args: tuple, kwargs: dict) -> torch.Tensor:
    """The (B, h, N, N) map of an attention module for recorded inputs."""
    if isinstance(attn, MultiheadAttention):
        return softmax_attention_map(attn, *args, **kwargs)
    return attn.attention_map(*args, **kwargs)


def check_map_capable(attn: nn.Module, role: str) -> None:
    """Raise a clear error for a module that cannot form an N x N map."""
    if isinstance(attn, MultiheadAttention):
        return
    if not (isinstance(attn, BaseAttention) and attn.has_attention_map):
        capable = [
            name
            for name, cls in registered_operators().items()
            if cls.has_attention_map
        ]
        raise TypeError(
            f'AttentionMapMSE: the {role} attention '
            f'{type(attn).__name__} has no N x N attention map; map '
            f'matching needs map-capable operators ({", ".join(capable)}). '
            'Use AttentionOutputMSE instead.'
        )


@MODELS.register_module()
class AttentionMapMSE(BlockwiseDistillLoss):
    """Mean over blocks of the MSE between attention maps.

    The teacher's softmax map softmax(q k^T / sqrt(d)) is compared with the
    student operator's ``attention_map`` (for kernel attention the row-
    normalised diag(phi(Q) phi(K)^T 1)^-1 phi(Q) phi(K)^T, the signed map for
    InLine), both (B, h, N, N) and formed from the attention inputs
    recorded during the forward pass. Maps are built one block at a time
    under activation checkpointing: they are freed once the block's MSE is
    known and formed again, one block at a time, in the backward pass, so
    no more than one block's maps exist at any moment. The per-block MSEs
    are logged as ``attn_map_mse.{i}``.

    Args:
        loss_weight (float): lambda; the paper sweeps {3e3, 1e4, 3e4, 1e5,
            3e5} (maps are entries of size ~1/N, hence the large values).
        blocks (str | list[int]): ``'all'`` (default) or block indices.
        tokens (str): ``'all'`` (default) or ``'patch'``. With ``'patch'``
            (or a class token on one side only) the patch-to-patch part of
            both maps is compared.
        num_queries (int, optional): Compare only this many query rows per
            block, drawn at random each step (the same rows for teacher and
            student). Defaults to None: every row.
    """

    records = ('inputs',)
    log_name = 'attn_map_mse'

    def __init__(
        self,
        loss_weight: float,
        blocks: str | list[int] = 'all',
        tokens: str = 'all',
        num_queries: int | None = None,
    ) -> None:
        super().__init__(loss_weight, blocks=blocks, tokens=tokens)
        if num_queries is not None and num_queries < 1:
            raise ValueError(
                'AttentionMapMSE: num_queries must be a '
                f'positive number of rows, got {num_queries}.'
            )
        self.num_queries = num_queries

    def check_modules(
        self, student_attns: list[nn.Module], teacher_attns: list[nn.Module]
    ) -> None:
        """Refuse, at build time, operators that have no map."""
        for i in self.block_indices(len(student_attns)):
            check_map_capable(student_attns[i], f'student block {i}')
            check_map_capable(teacher_attns[i], f'teacher block {i}')

    def forward(
        self, student: 'AttentionRecording', teacher: 'AttentionRecording'
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Compare two recordings.

        Args:
            student (AttentionRecording): ``modules[i]`` and ``inputs[i]``.
            teacher (AttentionRecording): ``modules[i]`` and ``inputs[i]``.

        Returns:
            tuple[Tensor, dict[str, Tensor]]: The weighted loss and the
            per-block MSEs.
        """

        def block_mse(i):
            rows = self._sample_rows(student, teacher, i)
            return checkpoint(
                self._block_mse, student, teacher, i, rows, use_reentrant=False
            )

        return self.mean_over_blocks(student.depth, block_mse)

    def _sample_rows(self, student, teacher, i):
        """Random query rows (indices into the matched tokens), or None."""
        if self.num_queries is None:
            return None
        x_s, x_t = student.inputs[i][0][0], teacher.inputs[i][0][0]
        x_s, _ = self.match_tokens(
            x_s, x_t, student.num_extra_tokens, teacher.num_extra_tokens
        )
        num_tokens = x_s.shape[1]
        if self.num_queries >= num_tokens:
            return None
        return torch.randperm(num_tokens, device=x_s.device)[
            : self.num_queries
        ]

    def _block_mse(self, student, teacher, i, rows):
        s_map = attention_map(student.modules[i], *student.inputs[i])
        with torch.no_grad():
            t_map = attention_map(teacher.modules[i], *teacher.inputs[i])
        if s_map.shape[1] != t_map.shape[1]:
            raise ValueError(
                f'AttentionMapMSE: block {i} of the student has '
                f'{s_map.shape[1]} heads, the teacher {t_map.shape[1]}.'
            )
        for dim in (-1, -2):
            s_map, t_map = self.match_tokens(
                s_map,
                t_map,
                student.num_extra_tokens,
                teacher.num_extra_tokens,
                dim,
            )
        if rows is not None:
            s_map, t_map = s_map[..., rows, :], t_map[..., rows, :]
        return F.mse_loss(s_map.float(), t_map.float())
