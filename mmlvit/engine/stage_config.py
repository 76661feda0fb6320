"""The stages of a staged conversion run as configured: each stage's
length, loss weights and trainable student parameters (see
:class:`~mmlvit.engine.hooks.ConversionStagesHook`)."""

from dataclasses import dataclass

from mmlvit.models.lora import ADAPTER_MARK

UNITS = ('epochs', 'iters')
STAGE_KEYS = {*UNITS, 'losses', 'task_loss', 'trainable', 'frozen'}


@dataclass(frozen=True)
class Stage:
    """One stage of a staged run (see
    :class:`~mmlvit.engine.hooks.ConversionStagesHook`)."""

    length: int
    losses: dict[str, float]
    task_weight: float
    trainable: tuple[str, ...] | None
    frozen: tuple[str, ...]

    def trains(self, name: str) -> bool:
        """Whether the student parameter ``name`` trains in this stage
        (an adapter's only when a ``trainable`` fragment names adapters)."""
        if self.trainable is None:
            picked = ADAPTER_MARK not in name
        else:
            picked = any(
                selects(fragment, name) for fragment in self.trainable
            )
        return picked and not any(fragment in name for fragment in self.frozen)


def selects(fragment: str, name: str) -> bool:
    """Whether the ``trainable`` fragment picks parameter ``name``: it
    occurs in the name, and an adapter's (``lora_``) only when the fragment
    names adapters too."""
    return fragment in name and (
        ADAPTER_MARK not in name or ADAPTER_MARK in fragment
    )


def parse_stage(number: int, cfg: dict) -> tuple[str, Stage]:
    """The length unit (``'epochs'`` or ``'iters'``) and :class:`Stage` of
    the stage config ``cfg``, the ``number``-th (from 1)."""
    where = f'ConversionStagesHook: stage {number}'
    unknown = set(cfg) - STAGE_KEYS
    if unknown:
        raise ValueError(
            f'{where} has unknown keys {sorted(unknown)}; a stage takes '
            f'{sorted(STAGE_KEYS)}.'
        )
    units = [unit for unit in UNITS if unit in cfg]
    if len(units) != 1:
        raise ValueError(f'{where} needs exactly one of epochs= or iters=.')
    length = cfg[units[0]]
    if not isinstance(length, int) or length < 1:
        raise ValueError(f'{where}: {units[0]}={length!r} is not >= 1.')
    task_loss = cfg.get('task_loss', True)
    if not isinstance(task_loss, (bool, int, float)) or task_loss < 0:
        raise ValueError(
            f'{where}: task_loss={task_loss!r} is neither a bool nor a '
            'weight >= 0.'
        )
    trainable = cfg.get('trainable')
    stage = Stage(
        length=length,
        losses={name: float(w) for name, w in cfg.get('losses', {}).items()},
        task_weight=float(task_loss),
        trainable=None if trainable is None else tuple(trainable),
        frozen=tuple(cfg.get('frozen', ())),
    )
    return units[0], stage
