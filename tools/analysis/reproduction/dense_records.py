"""One run of the dense grid (``tools/analysis/reproduce_dense.py``,
docs/dense_reproduction.md) and its result as named records, and the CSV
rows they are kept in (written and read by :mod:`.records`).

Columns, in this order: ``task`` (``seg`` or ``det``), ``setting``,
``canvas`` (px), ``train_images``, ``epochs``, ``seed`` (the run's key),
then ``iters`` (training iterations run), the metrics of the final
evaluation on the test canvases in percent with two decimals (``mIoU`` for
``seg``; ``bbox_mAP`` and ``segm_mAP``, COCO mAP x 100, for ``det``; the
other task's left empty), ``train_min`` and ``eval_min`` (wall minutes,
two decimals) and ``device``.
"""

from dataclasses import dataclass, fields

from .records import append_row, read_rows

# The metrics each task records, in column order.
TASK_METRICS = {'seg': ('mIoU',), 'det': ('bbox_mAP', 'segm_mAP')}
METRICS = tuple(m for names in TASK_METRICS.values() for m in names)


@dataclass(frozen=True)
class DenseConfiguration:
    """What a run trains, whatever its seed (the unit that tables and
    plots pool seeds over).

    Attributes:
        task (str): ``'seg'`` (UperNet, semantic segmentation) or ``'det'``
            (Mask R-CNN, boxes and instance masks).
        setting (str): ``'random'``, ``'mlpcopy+distill'``,
            ``'fullcopy+distill'`` or ``'softmax'``.
        canvas (int): Canvas side of the data (px).
        train_images (int): Training canvases.
        epochs (int): Training epochs.
    """

    task: str
    setting: str
    canvas: int
    train_images: int
    epochs: int


@dataclass(frozen=True)
class DenseRun(DenseConfiguration):
    """One run: a :class:`DenseConfiguration` and its random ``seed``."""

    seed: int

    def configuration(self):
        return DenseConfiguration(
            self.task,
            self.setting,
            self.canvas,
            self.train_images,
            self.epochs,
        )

    def key(self):
        """What identifies the run in the CSV: the strings of its columns."""
        return tuple(str(getattr(self, f.name)) for f in fields(self))

    @property
    def name(self):
        """The run's work-directory name (``+`` spelled ``-``)."""
        return '_'.join(self.key()).replace('+', '-')

    @classmethod
    def from_row(cls, row):
        return cls(
            task=row['task'],
            setting=row['setting'],
            canvas=int(row['canvas']),
            train_images=int(row['train_images']),
            epochs=int(row['epochs']),
            seed=int(row['seed']),
        )


KEY_FIELDS = tuple(f.name for f in fields(DenseRun))
FIELDS = (
    *KEY_FIELDS,
    'iters',
    *METRICS,
    'train_min',
    'eval_min',
    'device',
)


@dataclass(frozen=True)
class DenseResult:
    """A finished run: its training ``iters``, ``metrics`` (metric name ->
    percent, the run's task's metrics only), training and evaluation wall
    minutes and the device."""

    run: DenseRun
    iters: int
    metrics: dict
    train_min: float
    eval_min: float
    device: str

    def row(self):
        """The CSV row: column -> string."""
        return dict(
            zip(KEY_FIELDS, self.run.key()),
            iters=str(self.iters),
            **{m: f'{v:.2f}' for m, v in self.metrics.items()},
            train_min=f'{self.train_min:.2f}',
            eval_min=f'{self.eval_min:.2f}',
            device=self.device,
        )

    @classmethod
    def from_row(cls, row):
        return cls(
            run=DenseRun.from_row(row),
            iters=int(row['iters']),
            metrics={m: float(row[m]) for m in METRICS if row.get(m)},
            train_min=float(row['train_min']),
            eval_min=float(row['eval_min']),
            device=row['device'],
        )


def read_dense_results(path):
    """The results kept in the CSV at ``path`` (none if there is no file)."""
    return [DenseResult.from_row(row) for row in read_rows(path)]


def append_dense_result(path, result):
    """Append one result to the CSV, writing the header to a new file."""
    append_row(path, result.row(), FIELDS)
