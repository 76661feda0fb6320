"""One run of the grid and its result as named records, and the CSV file
that keeps them: one row per finished run, appended as soon as it is known,
read back to resume a grid and to report on it.

The CSV format is fixed (the committed ``results/*.csv`` use it): the columns
of :data:`FIELDS` in that order, written by :mod:`csv` with its default
dialect; ``distill`` is 0 or 1, ``lambda`` is Python's ``str`` of a float
for a distilled run and ``0`` otherwise, ``top1`` has two decimals and
``wall_s`` one.
"""

import csv
import os
import os.path as osp
from dataclasses import dataclass

FIELDS = (
    'dataset',
    'operator',
    'setting',
    'distill',
    'lambda',
    'epochs',
    'seed',
    'top1',
    'wall_s',
    'device',
)
# The columns that identify a run (all but its results).
KEY_FIELDS = FIELDS[:7]


def format_lambda(distill, lam):
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
    lam: float
    epochs: int


@dataclass(frozen=True)
class Run(Configuration):
    """One run of the grid: a :class:`Configuration` and its random
    ``seed`` (int)."""

    seed: int

    def configuration(self):
        return Configuration(
            self.dataset,
            self.operator,
            self.setting,
            self.distill,
            float(self.lam),
            self.epochs,
        )

    def key(self):
        """What identifies the run in the CSV: the strings of its columns."""
        return (
            self.dataset,
            self.operator,
            self.setting,
            str(int(self.distill)),
            format_lambda(self.distill, self.lam),
            str(self.epochs),
            str(self.seed),
        )

    @property
    def name(self):
        """The run's work-directory name: its key joined by ``_``."""
        return '_'.join(self.key())

    @classmethod
    def from_row(cls, row):
        """The run of a CSV row (a dict of column strings)."""
        return cls(
            dataset=row['dataset'],
            operator=row['operator'],
            setting=row['setting'],
            distill=bool(int(row['distill'])),
            lam=float(row['lambda']),
            epochs=int(row['epochs']),
            seed=int(row['seed']),
        )


@dataclass(frozen=True)
class RunResult:
    """A finished run: top-1 (%) on the target's test split, training plus
    test wall time (s) and the device (``'cpu'`` or ``'cuda'``)."""

    run: Run
    top1: float
    wall_s: float
    device: str

    def row(self):
        """The CSV row: column -> string."""
        return dict(
            zip(KEY_FIELDS, self.run.key()),
            top1=f'{self.top1:.2f}',
            wall_s=f'{self.wall_s:.1f}',
            device=self.device,
        )

    @classmethod
    def from_row(cls, row):
        return cls(
            run=Run.from_row(row),
            top1=float(row['top1']),
            wall_s=float(row['wall_s']),
            device=row['device'],
        )


def read_rows(path):
    """The rows of the CSV at ``path`` as dicts of column strings (none if
    there is no file)."""
    if not osp.isfile(path):
        return []
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


def append_row(path, row, fields):
    """Append one row (column -> string) to the CSV with the columns
    ``fields``, writing the header to a new file."""
    new = not osp.isfile(path)
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, 'a', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        if new:
            writer.writeheader()
        writer.writerow(row)


def read_results(path):
    """The results kept in the CSV at ``path`` (none if there is no file)."""
    return [RunResult.from_row(row) for row in read_rows(path)]


def append_result(path, result):
    """Append one result to the CSV, writing the header to a new file."""
    append_row(path, result.row(), FIELDS)
