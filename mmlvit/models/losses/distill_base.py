"""The interface of the distillation losses, and the block and token
selection of the block-wise ones."""

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from mmpretrain.registry import MODELS

if TYPE_CHECKING:
    from mmlvit.models.distillers import AttentionRecording

TOKEN_CHOICES = ('all', 'patch')


class DistillLoss(nn.Module):
    """Base of the losses an ``AttentionDistiller`` adds to the task loss.

    A loss is called as ``loss(student, teacher)`` with two recordings of one
    forward pass (see :class:`mmlvit.models.distillers.AttentionRecording`),
    and returns ``(weighted_loss, logs)``: the scalar to add to the total and
    a dict of detached values for the log, whose names contain no ``'loss'``
    so that ``BaseModel.parse_losses`` does not add them again.

    What a loss reads is declared, not coded into the distiller: ``records``
    names the recorded tensors (``mmlvit.models.distillers.PROBES``: e.g.
    ``'outputs'``, ``'inputs'``, ``'logits'``, or a probe the loss's module
    adds) and :meth:`block_indices` the blocks they are recorded for.

    Args:
        loss_weight (float): Multiplies the loss.
    """

    #: Names of the recorded tensors the loss reads.
    records: tuple[str, ...] = ()
    #: The loss is 0 when the student is the teacher (same recordings).
    zero_for_identical_models: bool = True

    def __init__(self, loss_weight: float) -> None:
        super().__init__()
        self.loss_weight = loss_weight

    def block_indices(self, depth: int) -> list[int]:
        """The blocks whose attention modules the loss reads."""
        return []

    def check_modules(
        self, student_attns: list[nn.Module], teacher_attns: list[nn.Module]
    ) -> None:
        """Raise at build time if the attention modules (one per block) do
        not support this loss."""

    def forward(
        self, student: 'AttentionRecording', teacher: 'AttentionRecording'
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(weighted_loss, logs)`` of two recordings."""
        raise NotImplementedError


def check_choice(owner: str, name: str, value, choices: tuple) -> None:
    """Raise ``ValueError`` (naming ``owner``, the loss) unless argument
    ``name``'s ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(
            f'{owner}: {name} must be one of {choices}, got {value!r}.'
        )


def registered_distill_losses() -> dict[str, type]:
    """Every :class:`DistillLoss` subclass in mmpretrain's ``MODELS``
    registry, by name (sorted); losses registered later (a plugin, a test
    module) are included from then on."""
    return {
        name: module
        for name, module in sorted(MODELS.module_dict.items())
        if isinstance(module, type) and issubclass(module, DistillLoss)
    }


class BlockwiseDistillLoss(DistillLoss):
    """Base of the losses that compare the teacher's and the student's
    attention modules block by block.

    Args:
        loss_weight (float): Multiplies the mean over blocks.
        blocks (str | list[int]): ``'all'`` or the indices of the blocks to
            compare (negative indices count from the last block).
        tokens (str): ``'all'`` or ``'patch'`` (class token left out). When
            the teacher and the student have different numbers of non-patch
            tokens, the patch tokens are matched whatever this says.
    """

    #: Prefix of the per-block log entries.
    log_name: str | None = None

    def __init__(
        self,
        loss_weight: float,
        blocks: str | list[int] = 'all',
        tokens: str = 'all',
    ) -> None:
        super().__init__(loss_weight)
        check_choice(type(self).__name__, 'tokens', tokens, TOKEN_CHOICES)
        if blocks != 'all' and not (
            isinstance(blocks, (list, tuple))
            and blocks
            and all(isinstance(b, int) for b in blocks)
        ):
            raise ValueError(
                f"{type(self).__name__}: blocks must be 'all' or a non-empty "
                f'list of block indices, got {blocks!r}.'
            )
        self.blocks = blocks
        self.tokens = tokens

    def block_indices(self, depth: int) -> list[int]:
        """The compared blocks of a ``depth``-block model, in order.

        Raises:
            IndexError: A configured block does not exist.
        """
        if self.blocks == 'all':
            return list(range(depth))
        indices = []
        for block in self.blocks:
            if not -depth <= block < depth:
                raise IndexError(
                    f'{type(self).__name__}: block {block} does not exist; '
                    f'the models have {depth} blocks (0..{depth - 1}).'
                )
            indices.append(block % depth)
        return sorted(set(indices))

    def mean_over_blocks(
        self, depth: int, block_loss
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The weighted mean of a loss over the compared blocks.

        Args:
            depth (int): The models' number of blocks.
            block_loss (Callable[[int], Tensor]): Block ``i``'s loss, a 0-d
                tensor; called once per compared block, in order.

        Returns:
            tuple[Tensor, dict[str, Tensor]]: ``loss_weight`` times the mean
            over the blocks, and each block's loss (detached) as
            ``{log_name}.{i}``.
        """
        blocks = self.block_indices(depth)
        per_block = torch.stack([block_loss(i) for i in blocks])
        logs = {
            f'{self.log_name}.{i}': value.detach()
            for i, value in zip(blocks, per_block)
        }
        return self.loss_weight * per_block.mean(), logs

    def match_tokens(
        self,
        student: torch.Tensor,
        teacher: torch.Tensor,
        student_extra: int | None,
        teacher_extra: int | None,
        dim: int = 1,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`match_tokens` with this loss's ``tokens`` choice."""
        return match_tokens(
            student,
            teacher,
            student_extra,
            teacher_extra,
            tokens=self.tokens,
            dim=dim,
            owner=type(self).__name__,
        )


def match_tokens(
    student: torch.Tensor,
    teacher: torch.Tensor,
    student_extra: int | None,
    teacher_extra: int | None,
    tokens: str = 'all',
    dim: int = 1,
    owner: str = 'Distillation',
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut a student's and a teacher's token sequences to the tokens that
    are compared: all of them, or the patch tokens when ``tokens='patch'``
    or when the two have different numbers of extra (class) tokens.

    Args:
        student (Tensor): Student tokens along ``dim`` (extra tokens,
            e.g. the class token, first, then the patches).
        teacher (Tensor): Teacher tokens along ``dim``.
        student_extra (int | None): Non-patch tokens of the student.
        teacher_extra (int | None): Non-patch tokens of the teacher.
        tokens (str): ``'all'`` or ``'patch'``.
        dim (int): The token dimension.
        owner (str): Named in error messages.

    Returns:
        tuple[Tensor, Tensor]: Views with the same number of tokens.
    """
    if tokens == 'all' and student_extra == teacher_extra:
        kind = 'tokens'
    elif student_extra is None or teacher_extra is None:
        raise ValueError(
            f'{owner}: matching patch tokens needs the backbones to state '
            'their num_extra_tokens (as mmpretrain VisionTransformer does).'
        )
    else:
        kind = 'patch tokens'
        student = student.narrow(
            dim, student_extra, student.shape[dim] - student_extra
        )
        teacher = teacher.narrow(
            dim, teacher_extra, teacher.shape[dim] - teacher_extra
        )
    if student.shape[dim] != teacher.shape[dim]:
        raise ValueError(
            f'{owner}: the student has {student.shape[dim]} {kind}, the '
            f'teacher {teacher.shape[dim]}: they must see the same patch '
            'grid.'
        )
    return student, teacher
