"""Softmax-to-linear transfer: read softmax checkpoints, copy what stays
the same, initialise the rest analytically or by default."""

# Registers the TTTFullCopy setting and its copy rules.
from . import ttt_inheritance  # noqa: F401
from .analytical import impulse_init_, mimetic_init_
from .arch import ViTArch, infer_vit_arch
from .components import COMPONENTS, component_of
from .copy_rules import (
    COPY_RULES,
    CopyRule,
    TensorMatch,
    register_copy_rule,
)
from .errors import TransferError
from .model_init import choose_source, initialise, plan_initialise
from .policies import Policy, apply_init, plan_init, resolve_policy
from .readers import FORMATS, load_softmax_checkpoint
from .report import CopyReport
from .settings import (
    SETTINGS,
    Setting,
    get_setting,
    register_setting,
    setting_names,
)
from .source import (
    SoftmaxCheckpoint,
    backbone_img_size,
    softmax_checkpoint_of,
)
from .specs import GROUPS, components_text, is_preset, spec_policy

__all__ = [
    'COMPONENTS',
    'COPY_RULES',
    'FORMATS',
    'GROUPS',
    'SETTINGS',
    'CopyReport',
    'CopyRule',
    'Policy',
    'Setting',
    'SoftmaxCheckpoint',
    'TensorMatch',
    'TransferError',
    'ViTArch',
    'apply_init',
    'backbone_img_size',
    'choose_source',
    'component_of',
    'components_text',
    'get_setting',
    'impulse_init_',
    'infer_vit_arch',
    'initialise',
    'is_preset',
    'load_softmax_checkpoint',
    'mimetic_init_',
    'plan_init',
    'plan_initialise',
    'register_copy_rule',
    'register_setting',
    'resolve_policy',
    'setting_names',
    'softmax_checkpoint_of',
    'spec_policy',
]
