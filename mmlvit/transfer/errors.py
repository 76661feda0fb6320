"""Errors of the softmax-to-linear transfer."""

from collections.abc import Iterable


class TransferError(ValueError):
    """A copy policy or an analytical init cannot be applied to this student
    and checkpoint; nothing was written."""


def preview_keys(keys: Iterable[str], limit: int = 8) -> str:
    """``['a', 'b', ... (N in all)]``: the first ``limit`` keys of a long
    list, for error messages."""
    keys = list(keys)
    shown = ', '.join(repr(k) for k in keys[:limit])
    more = f', ... ({len(keys)} in all)' if len(keys) > limit else ''
    return f'[{shown}{more}]'
