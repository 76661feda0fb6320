"""Errors of the softmax-to-linear transfer."""


class TransferError(ValueError):
    """A copy policy or an analytical init cannot be applied to this student
    and checkpoint; nothing was written."""
