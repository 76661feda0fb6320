"""The dense grid's plot, written next to its CSV: one panel per metric
(mIoU, box AP, mask AP), a bar per linear setting at its mean over seeds
with the std as an error bar, the softmax reference as a dashed line (its
std shaded)."""

from ..configs import SOFTMAX, setting_title
from ..figures import (
    legend_right,
    panel_row,
    save_figure,
    seed_error_bars,
    softmax_reference,
)
from .report import METRIC_NAMES, summarise_dense


def draw_dense(results):
    """The figure :func:`plot_dense` writes."""
    table = summarise_dense(results)
    fig, axes = panel_row(len(table), 3.6, 2.2, 3.8)
    for ax, ((_, metric), cells) in zip(axes, table.items()):
        bars = [(k, s) for k, s in cells.items() if k != SOFTMAX]
        xs = range(len(bars))
        ax.bar(
            xs,
            [s.mean for _, s in bars],
            0.6,
            color=[f'C{i}' for i in xs],
        )
        seed_error_bars(ax, xs, [s for _, s in bars], capsize=3)
        tops = [s.mean + s.std for _, s in bars]
        if SOFTMAX in cells:
            ref = cells[SOFTMAX]
            softmax_reference(ax, ref, 'softmax std over seeds')
            tops.append(ref.mean + ref.std)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(
            [setting_title(k).replace(' + ', '\n+ ') for k, _ in bars],
            fontsize=8,
        )
        ax.set_ylim(0, max(tops, default=1) * 1.12 or 1)
        ax.set_title(METRIC_NAMES[metric], fontsize=10)
        ax.set_ylabel('%, mean +- std over seeds', fontsize=8)
    legend_right(fig, axes)
    return fig


def plot_dense(results, path):
    """Write :func:`draw_dense`'s figure to ``path``."""
    save_figure(draw_dense(results), path)
