"""The dense grid's summary over seeds and its Markdown tables: each
metric's mean +- std per setting, and each setting's gain over Random (in
points and in units of the two cells' pooled std) with the share of the
Random-to-softmax gap it closes."""

from collections import defaultdict
from dataclasses import dataclass

from ..configs import SOFTMAX, setting_title
from ..summary import cell, gain, mean_std
from .configs import DENSE_SETTINGS
from .records import TASK_METRICS

RANDOM = 'random'
METRIC_NAMES = {
    'mIoU': 'mIoU (UperNet)',
    'bbox_mAP': 'box AP (Mask R-CNN)',
    'segm_mAP': 'mask AP (Mask R-CNN)',
}


@dataclass(frozen=True)
class MetricSummary:
    """One metric of one configuration over its seeds: ``mean``, ``std``
    (0 with one seed) and the seed count ``n``; ``config`` is the
    :class:`~.records.DenseConfiguration`."""

    config: object
    metric: str
    mean: float
    std: float
    n: int


def summarise_dense(results):
    """{(task, metric): {setting: MetricSummary}}, seeds pooled, in the
    order of the tasks' metrics and of
    :data:`~.configs.DENSE_SETTINGS`.

    Raises:
        ValueError: The results mix schedules or data sizes for one task
            and setting (one table holds one schedule).
    """
    groups = defaultdict(list)
    for result in results:
        for metric, value in result.metrics.items():
            groups[(result.run.configuration(), metric)].append(value)
    table = {}
    for task, metrics in TASK_METRICS.items():
        for metric in metrics:
            cells = {}
            for setting in DENSE_SETTINGS:
                own = [
                    (config, values)
                    for (config, m), values in groups.items()
                    if config.task == task
                    and config.setting == setting
                    and m == metric
                ]
                if len(own) > 1:
                    raise ValueError(
                        f'{task} {setting}: runs of {len(own)} schedules '
                        'in one CSV; keep one schedule per CSV.'
                    )
                if own:
                    config, values = own[0]
                    cells[setting] = MetricSummary(
                        config, metric, *mean_std(values), len(values)
                    )
            if cells:
                table[(task, metric)] = cells
    return table


def gap_closed(cell, random, softmax):
    """The share (%) of the Random-to-softmax gap that ``cell`` closes
    (None when softmax does not beat Random by more than their pooled
    std: a share of a gap within seed noise means nothing)."""
    span, ratio = gain(softmax, random)
    if span <= 0 or ratio is None or ratio <= 1:
        return None
    return 100.0 * (cell.mean - random.mean) / span


def markdown(results):
    """The two Markdown tables, as one string: per metric, the settings'
    mean +- std (seeds); then per metric and linear setting, the gain over
    Random and the share of the Random-to-softmax gap closed."""
    table = summarise_dense(results)
    settings = [
        k for k in DENSE_SETTINGS if any(k in c for c in table.values())
    ]
    lines = [
        '| metric | ' + ' | '.join(setting_title(k) for k in settings) + ' |',
        '| --- |' + ' --- |' * len(settings),
    ]
    for (_, metric), cells in table.items():
        values = [cell(cells[k]) if k in cells else '-' for k in settings]
        name = METRIC_NAMES[metric]
        lines.append(f'| {name} | ' + ' | '.join(values) + ' |')
    lines += [
        '',
        '| metric | setting | gain vs Random (points) | gain / pooled std '
        '| Random-to-softmax gap closed |',
        '| --- | --- | --- | --- | --- |',
    ]
    for (_, metric), cells in table.items():
        random = cells.get(RANDOM)
        if random is None:
            continue
        for setting, summary in cells.items():
            if setting == RANDOM:
                continue
            delta, ratio = gain(summary, random)
            closed = (
                gap_closed(summary, random, cells[SOFTMAX])
                if SOFTMAX in cells and setting != SOFTMAX
                else None
            )
            lines.append(
                f'| {METRIC_NAMES[metric]} | {setting_title(setting)} | '
                f'{delta:+.2f} | '
                + ('-' if ratio is None else f'{ratio:+.1f}')
                + ' | '
                + ('-' if closed is None else f'{closed:.0f} %')
                + ' |'
            )
    return '\n'.join(lines) + '\n'
