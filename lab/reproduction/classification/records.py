"""One classification run and its result as named records, and their CSV
rows (kept by :mod:`lab.reproduction.records`).

The columns are fixed (the committed ``results/*.csv`` use them):
``dataset, operator, setting, distill, lambda, epochs, seed`` (the run's
key), then ``top1, wall_s, device`` and ``components``. ``distill`` is 0 or
1, ``lambda`` is Python's ``str`` of a float for a distilled run and ``0``
otherwise, ``top1`` has two decimals and ``wall_s`` one. ``components``
(the components the run's init hook copied, space-separated, ``none`` for
none) came later: a CSV without it still reads (None there) and resumes.
"""

from dataclasses import dataclass, field

from ..records import GridResult, GridRun


def format_lambda(distill: bool, lam: float) -> str:
    """The ``lambda`` column: ``str`` of the float weight for a distilled
    run, ``'0'`` for a run without distillation (no weight)."""
    return str(float(lam)) if distill or lam else '0'


@dataclass(frozen=True)
class Configuration:
    """What a run trains, whatever its seed (the unit the tables and plots
    pool seeds over).

    Attributes:
        dataset (str): Target (a key of ``configs.TARGETS``).
        operator (str): Operator short name, ``'softmax'`` for the softmax
            reference.
        setting (str): Setting short name (``mmlvit.transfer.SETTINGS``) or
            ``'softmax'``: the softmax teacher fine-tuned.
        distill (bool): Attention-output distillation from the teacher.
        lam (float): Distillation weight lambda (0 without distillation);
            the CSV column ``lambda``.
        epochs (int): Training epochs.
    """

    dataset: str
    operator: str
    setting: str
    distill: bool
    lam: float = field(metadata={'column': 'lambda'})
    epochs: int


@dataclass(frozen=True)
class Run(GridRun, Configuration):
    """One run of the grid: a :class:`Configuration` and its random
    ``seed`` (int)."""

    CONFIGURATION = Configuration
    seed: int

    def column_text(self, name: str) -> str:
        if name == 'lam':
            return format_lambda(self.distill, self.lam)
        return super().column_text(name)


@dataclass(frozen=True)
class RunResult(GridResult):
    """A finished run: top-1 (%) on the target's test split, training plus
    test wall time (s), the device (``'cpu'`` or ``'cuda'``) and the
    components copied into the student (``mmlvit.transfer.components_text``;
    None where the CSV predates the column)."""

    RUN = Run
    run: Run
    top1: float = field(metadata={'format': '.2f'})
    wall_s: float = field(metadata={'format': '.1f'})
    device: str
    components: str = field(default=None, metadata={'optional': True})

    def progress(self) -> str:
        """The grid's progress line about this result."""
        return f'top-1 {self.top1:.2f}% in {self.wall_s:.0f} s'
