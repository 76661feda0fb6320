"""What a classification grid may name (operators from the registry,
settings from ``mmlvit.transfer``) and the mmengine config of one run.

Students are the tiny ViT's shapes with a linear operator, built from the
configs under ``configs/fashion_mnist`` and ``configs/_base_``
(docs/reproduction.md); the softmax reference is the teacher config itself.
"""

import os.path as osp

from mmengine.config import Config

from mmlvit.models.attentions import registered_operators
from mmlvit.transfer import spec_policy

from ..configs import ROOT, SOFTMAX, evaluate_once_at_end, grid_settings

CONFIGS = osp.join(ROOT, 'configs', 'fashion_mnist')
TEACHER_CONFIG = osp.join(CONFIGS, 'vit-tiny-p4_softmax_fashion-mnist.py')
STUDENT_CONFIG = osp.join(
    CONFIGS, 'vit-tiny-p4_gla_random_fashion-mnist-5k.py'
)
DISTILL_CONFIG = osp.join(
    CONFIGS, 'vit-tiny-p4_gla_copy-distill_fashion-mnist-5k.py'
)
TARGETS = {
    'fashion-mnist-5k': osp.join(
        ROOT, 'configs/_base_/datasets/fashion_mnist-5k_bs64.py'
    ),
    'mnist-5k': osp.join(ROOT, 'configs/_base_/datasets/mnist5k_bs64.py'),
}

# Speed-only overrides of an operator's config, by registry name. The tiny
# ViT has 50 tokens: GLA's PyTorch scan runs fastest there in chunks of 16
# (the function does not depend on the chunk size).
PERFORMANCE_OVERRIDES = {
    'GatedLinearAttention': dict(chunk_size=16),
}

# The softmax reference starts from the teacher with everything but the
# head.
SOFTMAX_INIT = 'FullCopy'


def linear_operators() -> dict:
    """Short name -> registry name of every registered operator whose cost
    is linear in the token count (what a grid's students may use).

    Raises:
        ValueError: Two registered operators share a short name.
    """
    names = {}
    for name, cls in registered_operators(linear_cost=True).items():
        if cls.short_name is None:
            continue
        if cls.short_name in names:
            raise ValueError(
                f'{name} and {names[cls.short_name]} share the short name '
                f'{cls.short_name!r}.'
            )
        names[cls.short_name] = name
    return dict(sorted(names.items()))


def operator_cfg(short_name: str) -> dict:
    """The ``attn_cfg`` of an operator: its registry type plus the tool's
    performance overrides."""
    name = linear_operators()[short_name]
    return dict(type=name, **PERFORMANCE_OVERRIDES.get(name, {}))


def init_setting(setting: str):
    """The ``SoftmaxToLinearInitHook`` setting of a run's setting (short
    name, component spec or ``'softmax'``; a spec's base setting), or None
    when it initialises nothing (Random: the run gets no init hook)."""
    if setting == SOFTMAX:
        return SOFTMAX_INIT
    policy = spec_policy(setting)
    if policy.components or policy.analytical:
        return policy.setting.name
    return None


def init_components(setting: str):
    """The hook's explicit ``components`` for a component spec (list of
    ``mmlvit.transfer.COMPONENTS``); None for a setting's short name or
    ``'softmax'`` (the hook copies the setting's own list, so the configs
    of the named settings are as before)."""
    if setting == SOFTMAX or setting in grid_settings():
        return None
    return list(spec_policy(setting).components)


def run_config(run, teacher: str, work_dir: str) -> Config:
    """The mmengine config of one run.

    Args:
        run (records.Run): The run.
        teacher (str): Softmax teacher checkpoint (init and distillation).
        work_dir (str): The run's work directory.
    """
    if run.setting == SOFTMAX:
        cfg = Config.fromfile(TEACHER_CONFIG)
    else:
        cfg = Config.fromfile(
            DISTILL_CONFIG if run.distill else STUDENT_CONFIG
        )
        model = cfg.model.student if run.distill else cfg.model
        # The backbone takes its token layout from the operator (no class
        # token, patch average, sin-cos positions for MHLA and TTT).
        model.backbone.attn_cfg = operator_cfg(run.operator)
    # Every run trains on the target's data with the target's test split as
    # its (final) evaluation.
    data = Config.fromfile(TARGETS[run.dataset])
    for key in (
        'data_preprocessor',
        'train_dataloader',
        'val_dataloader',
        'test_dataloader',
        'val_evaluator',
        'test_evaluator',
    ):
        cfg[key] = data[key]
    if run.distill:
        cfg.model.teacher_checkpoint = teacher
        cfg.model.distill_losses[0].loss_weight = float(run.lam)
    hooks = [
        h
        for h in cfg.get('custom_hooks', [])
        if h.type != 'SoftmaxToLinearInitHook'
    ]
    setting = init_setting(run.setting)
    if setting is not None:
        hook = dict(
            type='SoftmaxToLinearInitHook', checkpoint=teacher, setting=setting
        )
        components = init_components(run.setting)
        if components is not None:
            hook['components'] = components
        hooks.append(hook)
    cfg.custom_hooks = hooks
    evaluate_once_at_end(cfg, run.epochs, run.seed, work_dir, 20)
    return cfg


def teacher_config(work_dir: str) -> Config:
    """The config that trains the teacher (Fashion-MNIST, 60k images)."""
    cfg = Config.fromfile(TEACHER_CONFIG)
    cfg.work_dir = work_dir
    return cfg


def limit_data(cfg, train_indices=None, test_indices=None) -> None:
    """Use only the first images of the splits (quick checks)."""
    if train_indices:
        cfg.train_dataloader.dataset.indices = train_indices
    for loader in ('val_dataloader', 'test_dataloader'):
        if test_indices and cfg.get(loader):
            cfg[loader].dataset.indices = test_indices
