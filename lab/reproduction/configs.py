"""What every grid's run config shares: the repository's paths, the shipped
teacher, the settings a grid names (a setting's short name or a component
spec, ``mmlvit.transfer.specs``), the short schedule and the single test
at the end of training.

Tasks build their run configs from the repository's configs (relative data
and checkpoint paths: the tools run from :data:`ROOT`).
"""

import os.path as osp

import mmlvit  # noqa: F401  (registers the modules)
from mmlvit.transfer import SETTINGS, TransferError, is_preset, spec_policy
from mmlvit.transfer.shipped import SHIPPED_ROOTS


def _repository_tree() -> str:
    """The tree holding configs/ and checkpoints/: the checkout the
    package is imported from, else an installed package's copy of them
    under mmlvit/.mim."""
    installed, checkout = SHIPPED_ROOTS
    if osp.isdir(osp.join(checkout, 'configs', 'fashion_mnist')):
        return checkout
    return installed


ROOT = _repository_tree()
DEFAULT_TEACHER = osp.join(
    ROOT, 'checkpoints', 'vit-tiny-p4_softmax_fashion-mnist.pth'
)
# The setting name of the softmax reference: the softmax model itself,
# fine-tuned.
SOFTMAX = 'softmax'
DISTILL_SUFFIX = '+distill'
DISTILL_MODES = dict(off=(False,), on=(True,), both=(False, True))


def grid_settings() -> dict:
    """Short name -> :class:`mmlvit.transfer.Setting`, in the order of
    ``mmlvit.transfer.SETTINGS`` (the tables' and plots' column order)."""
    return {s.short_name: s for s in SETTINGS.values()}


def split_setting(entry: str, distill: str = 'off') -> tuple:
    """(setting, distillation modes) of a ``--settings`` entry: ``NAME``
    follows ``distill`` ('off', 'on' or 'both'); ``NAME+distill`` is NAME
    with distillation only."""
    if entry.endswith(DISTILL_SUFFIX):
        return entry[: -len(DISTILL_SUFFIX)], (True,)
    return entry, DISTILL_MODES[distill]


def setting_title(entry: str) -> str:
    """The tables' name of a ``--settings`` entry: the setting's
    ``mmlvit.transfer`` name, a component spec's terms spaced out,
    `` + distill`` for ``NAME+distill`` (``'MLPCopy + distill'``,
    ``'FullCopy - attn'``); ``'softmax'`` for the reference.

    Raises:
        KeyError: ``entry`` names no setting.
    """
    setting, modes = split_setting(entry)
    if setting == SOFTMAX:
        return SOFTMAX
    base = setting if is_preset(setting) else _spec_base(setting)
    name = grid_settings()[base].name + _spaced(setting[len(base) :])
    return name + ' + distill' if modes == (True,) else name


def _spec_base(spec: str) -> str:
    """The short name of a component spec's base setting (KeyError for an
    invalid spec)."""
    try:
        return spec_policy(spec).setting.short_name
    except TransferError as err:
        raise KeyError(spec) from err


def _spaced(terms: str) -> str:
    """``'+norms-final_norm'`` -> ``' + norms - final_norm'``."""
    return terms.replace('+', ' + ').replace('-', ' - ')


def schedule(epochs: int) -> list:
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


def evaluate_once_at_end(cfg, epochs, seed, work_dir, log_interval) -> None:
    """Set ``cfg`` (an mmengine Config) to train ``epochs`` epochs on the
    :func:`schedule` with the config's own optimiser, without validation
    (so the checkpoint hook keeps only the last checkpoint: no best-of
    selection; the caller's ``runner.test()`` is the one, final
    evaluation), in-process data loading, seed ``seed``, in ``work_dir``."""
    cfg.train_cfg = dict(
        type='EpochBasedTrainLoop', max_epochs=epochs, val_interval=epochs
    )
    cfg.param_scheduler = schedule(epochs)
    cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.default_hooks.checkpoint = dict(
        type='mmpretrain.SafeCheckpointHook', interval=-1
    )
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=log_interval)
    cfg.randomness = dict(seed=seed)
    cfg.work_dir = work_dir
    for loader in ('train_dataloader', 'test_dataloader'):
        cfg[loader].num_workers = 0
        cfg[loader].persistent_workers = False
