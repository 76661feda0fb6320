"""What a grid may name (operators from the registry, settings from
``mmlvit.transfer``) and the mmengine config of one run.

Students are the tiny ViT's shapes with a linear operator, built from the
configs under ``configs/fashion_mnist`` and ``configs/_base_``
(docs/reproduction.md); the softmax reference is the teacher config itself.
"""

import os.path as osp

from mmengine.config import Config

import mmlvit  # noqa: F401  (registers the modules)
from mmlvit.models.attentions import registered_operators
from mmlvit.transfer import SETTINGS

ROOT = osp.dirname(
    osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
)
CONFIGS = osp.join(ROOT, 'configs', 'fashion_mnist')
TEACHER_CONFIG = osp.join(CONFIGS, 'vit-tiny-p4_softmax_fashion-mnist.py')
STUDENT_CONFIG = osp.join(
    CONFIGS, 'vit-tiny-p4_gla_random_fashion-mnist-5k.py'
)
DISTILL_CONFIG = osp.join(
    CONFIGS, 'vit-tiny-p4_gla_copy-distill_fashion-mnist-5k.py'
)
DEFAULT_TEACHER = osp.join(
    ROOT, 'checkpoints', 'vit-tiny-p4_softmax_fashion-mnist.pth'
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

# The setting name of the softmax reference: the teacher fine-tuned on the
# target, initialised from the teacher with everything but the head.
SOFTMAX = 'softmax'
SOFTMAX_INIT = 'FullCopy'


def linear_operators():
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


def operator_cfg(short_name):
    """The ``attn_cfg`` of an operator: its registry type plus the tool's
    performance overrides."""
    name = linear_operators()[short_name]
    return dict(type=name, **PERFORMANCE_OVERRIDES.get(name, {}))


def grid_settings():
    """Short name -> :class:`mmlvit.transfer.Setting`, in the order of
    ``mmlvit.transfer.SETTINGS`` (the tables' and plots' column order)."""
    return {s.short_name: s for s in SETTINGS.values()}


def init_setting(setting):
    """The ``SoftmaxToLinearInitHook`` setting of a run's setting (short
    name or ``'softmax'``), or None when it initialises nothing (Random:
    the run gets no init hook)."""
    if setting == SOFTMAX:
        return SOFTMAX_INIT
    s = grid_settings()[setting]
    return s.name if s.components or s.analytical else None


def run_config(run, teacher, work_dir):
    """The mmengine config of one run.

    Args:
        run (records.Run): The run.
        teacher (str): Softmax teacher checkpoint (init and distillation).
        work_dir (str): The run's work directory.

    Returns:
        mmengine.Config
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
        hooks.append(
            dict(
                type='SoftmaxToLinearInitHook',
                checkpoint=teacher,
                setting=setting,
            )
        )
    cfg.custom_hooks = hooks
    cfg.train_cfg = dict(
        by_epoch=True, max_epochs=run.epochs, val_interval=run.epochs
    )
    cfg.param_scheduler = schedule(run.epochs)
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.default_hooks.checkpoint = dict(type='SafeCheckpointHook', interval=-1)
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=20)
    cfg.randomness = dict(seed=run.seed)
    cfg.work_dir = work_dir
    for loader in ('train_dataloader', 'test_dataloader'):
        cfg[loader].num_workers = 0
        cfg[loader].persistent_workers = False
    return cfg


def schedule(epochs):
    """One linear warm-up epoch (none in a 1-epoch run), then cosine
    annealing to the last epoch."""
    warmup = min(1, epochs - 1)
    steps = [
        dict(
            type='LinearLR',
            start_factor=1e-3,
            by_epoch=True,
            begin=0,
            end=warmup,
            convert_to_iter_based=True,
        ),
        dict(
            type='CosineAnnealingLR',
            eta_min=1e-6,
            by_epoch=True,
            begin=warmup,
            end=epochs,
            convert_to_iter_based=True,
        ),
    ]
    return steps if warmup else steps[1:]


def teacher_config(work_dir):
    """The config that trains the teacher (Fashion-MNIST, 60k images)."""
    cfg = Config.fromfile(TEACHER_CONFIG)
    cfg.work_dir = work_dir
    return cfg


def limit_data(cfg, train_indices=None, test_indices=None):
    """Use only the first images of the splits (quick checks)."""
    if train_indices:
        cfg.train_dataloader.dataset.indices = train_indices
    for loader in ('val_dataloader', 'test_dataloader'):
        if test_indices and cfg.get(loader):
            cfg[loader].dataset.indices = test_indices
