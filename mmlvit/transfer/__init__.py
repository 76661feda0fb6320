"""Softmax-to-linear transfer: read softmax checkpoints, copy what stays
the same, initialise the rest analytically or by default."""

from .analytical import impulse_init_, mimetic_init_
from .errors import TransferError
from .policies import (
    COMPONENTS,
    SETTINGS,
    CopyReport,
    Policy,
    apply_init,
    component_of,
    resolve_policy,
)
from .readers import FORMATS, load_softmax_checkpoint

__all__ = [
    'COMPONENTS',
    'FORMATS',
    'SETTINGS',
    'CopyReport',
    'Policy',
    'TransferError',
    'apply_init',
    'component_of',
    'impulse_init_',
    'load_softmax_checkpoint',
    'mimetic_init_',
    'resolve_policy',
]
