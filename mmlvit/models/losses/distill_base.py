"""The interface of the distillation losses, and the block and token
selection of the block-wise ones."""

import torch.nn as nn

TOKEN_CHOICES = ('all', 'patch')


class DistillLoss(nn.Module):
    """Base of the losses an ``AttentionDistiller`` adds to the task loss.

    A loss is called as ``loss(student, teacher)`` with two recordings of one
    forward pass (see :class:`mmlvit.models.distillers.AttentionRecording`),
    and returns ``(weighted_loss, logs)``: the scalar to add to the total and
    a dict of detached values for the log, whose names contain no ``'loss'``
    so that ``BaseModel.parse_losses`` does not add them again. The class
    attributes and :meth:`block_indices` tell the distiller what to record.
    """

    #: The loss reads ``recording.inputs`` (the attention modules' inputs).
    needs_inputs = False
    #: The loss reads ``recording.logits`` (the heads' outputs).
    needs_logits = False

    def block_indices(self, depth):
        """The blocks whose attention modules the loss reads."""
        return []

    def check_modules(self, student_attns, teacher_attns):
        """Raise at build time if the attention modules (one per block) do
        not support this loss."""


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
    log_name = None

    def __init__(self, loss_weight, blocks='all', tokens='all'):
        super().__init__()
        if tokens not in TOKEN_CHOICES:
            raise ValueError(
                f'{type(self).__name__}: tokens must be one of '
                f'{TOKEN_CHOICES}, got {tokens!r}.'
            )
        if blocks != 'all' and not (
            isinstance(blocks, (list, tuple))
            and blocks
            and all(isinstance(b, int) for b in blocks)
        ):
            raise ValueError(
                f"{type(self).__name__}: blocks must be 'all' or a non-empty "
                f'list of block indices, got {blocks!r}.'
            )
        self.loss_weight = loss_weight
        self.blocks = blocks
        self.tokens = tokens

    def block_indices(self, depth):
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

    def match_tokens(
        self, student, teacher, student_extra, teacher_extra, dim=1
    ):
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
    student,
    teacher,
    student_extra,
    teacher_extra,
    tokens='all',
    dim=1,
    owner='Distillation',
):
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
