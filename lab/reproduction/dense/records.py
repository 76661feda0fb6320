"""One dense run and its result as named records, and their CSV rows (kept
by :mod:`lab.reproduction.records`).

Columns, in this order: ``task`` (``seg`` or ``det``), ``setting``,
``canvas`` (px), ``train_images``, ``epochs``, ``seed`` (the run's key),
then ``iters`` (training iterations run), the metrics of the final
evaluation on the test canvases in percent with two decimals (``mIoU`` for
``seg``; ``bbox_mAP`` and ``segm_mAP``, COCO mAP x 100, for ``det``; the
other task's left empty), ``train_min`` and ``eval_min`` (wall minutes,
two decimals) and ``device``.
"""

from dataclasses import dataclass, field

from ..records import GridResult, GridRun

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
        setting (str): A ``--settings`` entry of the grid
            (``configs.DENSE_SETTINGS``): ``'random'``,
            ``'mlpcopy+distill'``, ``'fullcopy+distill'`` or ``'softmax'``.
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
class DenseRun(GridRun, DenseConfiguration):
    """One run: a :class:`DenseConfiguration` and its random ``seed``."""

    CONFIGURATION = DenseConfiguration
    seed: int


@dataclass(frozen=True)
class DenseResult(GridResult):
    """A finished run: its training ``iters``, ``metrics`` (metric name ->
    percent, the run's task's metrics only), training and evaluation wall
    minutes and the device."""

    RUN = DenseRun
    run: DenseRun
    iters: int
    metrics: dict = field(metadata={'columns': METRICS, 'format': '.2f'})
    train_min: float = field(metadata={'format': '.2f'})
    eval_min: float = field(metadata={'format': '.2f'})
    device: str

    def progress(self) -> str:
        """The grid's progress line about this result."""
        scores = ', '.join(f'{m} {v:.2f}' for m, v in self.metrics.items())
        return (
            f'{scores} after {self.iters} iterations, '
            f'{self.train_min:.1f} + {self.eval_min:.1f} min'
        )
