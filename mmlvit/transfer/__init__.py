"""Softmax-to-linear transfer: read softmax checkpoints, copy what stays
the same, initialise the rest analytically or by default."""

from .analytical import impulse_init_, mimetic_init_
from .components import COMPONENTS, component_of
from .errors import TransferError
from .policies import Policy, apply_init, plan_init, resolve_policy
from .readers import FORMATS, load_softmax_checkpoint
from .report import CopyReport
from .settings import SETTINGS, Setting, get_setting, setting_names

__all__ = [
    'COMPONENTS',
    'FORMATS',
    'SETTINGS',
    'CopyReport',
    'Policy',
    'Setting',
    'TransferError',
    'apply_init',
    'component_of',
    'get_setting',
    'impulse_init_',
    'load_softmax_checkpoint',
    'mimetic_init_',
    'plan_init',
    'resolve_policy',
    'setting_names',
]
