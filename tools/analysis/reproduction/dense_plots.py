"""The dense grid's plot, written next to its CSV: one panel per metric
(mIoU, box AP, mask AP), a bar per linear setting at its mean over seeds
with the std as an error bar, the softmax reference as a dashed line (its
std shaded)."""

from .dense_report import (
    METRIC_NAMES,
    SETTING_NAMES,
    SOFTMAX,
    summarise_dense,
)
from .plots import STD_LABEL, _pyplot


def draw_dense(results):
    """The figure :func:`plot_dense` writes."""
    plt = _pyplot()
    table = summarise_dense(results)
    fig, axes = plt.subplots(
        1,
        len(table),
        figsize=(3.6 * len(table) + 2.2, 3.8),
        squeeze=False,
        layout='constrained',
    )
    legend = {}
    for ax, ((_, metric), cells) in zip(axes[0], table.items()):
        bars = [(k, s) for k, s in cells.items() if k != SOFTMAX]
        xs = range(len(bars))
        ax.bar(
            xs,
            [s.mean for _, s in bars],
            0.6,
            color=[f'C{i}' for i in xs],
        )
        spread = [(x, s) for x, (_, s) in zip(xs, bars) if s.n > 1]
        if spread:
            ax.errorbar(
                [x for x, _ in spread],
                [s.mean for _, s in spread],
                yerr=[s.std for _, s in spread],
                fmt='none',
                ecolor='k',
                capsize=3,
                label=STD_LABEL,
            )
        tops = [s.mean + s.std for _, s in bars]
        if SOFTMAX in cells:
            ref = cells[SOFTMAX]
            ax.axhline(ref.mean, ls='--', color='k', label='softmax')
            if ref.n > 1:
                ax.axhspan(
                    ref.mean - ref.std,
                    ref.mean + ref.std,
                    color='k',
                    alpha=0.1,
                    lw=0,
                    label='softmax std over seeds',
                )
            tops.append(ref.mean + ref.std)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(
            [SETTING_NAMES[k].replace(' + ', '\n+ ') for k, _ in bars],
            fontsize=8,
        )
        ax.set_ylim(0, max(tops, default=1) * 1.12 or 1)
        ax.set_title(METRIC_NAMES[metric], fontsize=10)
        ax.set_ylabel('%, mean +- std over seeds', fontsize=8)
        handles, labels = ax.get_legend_handles_labels()
        legend.update(zip(labels, handles))
    fig.legend(
        legend.values(), legend.keys(), loc='outside right upper', fontsize=7
    )
    return fig


def plot_dense(results, path):
    """Write :func:`draw_dense`'s figure to ``path``."""
    fig = draw_dense(results)
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
