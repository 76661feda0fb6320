"""The grid's plots, written next to its CSV: bars in the style of Fig. 4
of Qin et al. (arXiv:2609.35745; docs/reproduction.md) for a settings grid,
or top-1 against lambda / epochs for a sweep."""

from collections import defaultdict

from .configs import SOFTMAX, grid_settings
from .report import summarise, sweep_axis


def _pyplot():
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    return plt


def plot_results(results, path):
    """Write the sweep plot when the results vary epochs or lambda, else the
    Fig.-4-style bars, to ``path``."""
    fig = draw(results)
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)


def draw(results):
    """The figure :func:`plot_results` writes."""
    axis = sweep_axis(summarise(results))
    return draw_sweep(results, axis) if axis else draw_bars(results)


def draw_sweep(results, axis):
    """Top-1 (mean +- std over seeds) against ``axis`` ('epochs' or
    'lambda'), one line per dataset, operator, setting and distillation."""
    plt = _pyplot()
    lines = defaultdict(list)
    for s in summarise(results):
        label = f'{s.dataset} {s.operator} {s.setting}' + (
            ' + distill' if s.distill else ''
        )
        lines[label].append(s)
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, points in sorted(lines.items()):
        points.sort(key=lambda s: s.epochs if axis == 'epochs' else s.lam)
        ax.errorbar(
            [s.epochs if axis == 'epochs' else s.lam for s in points],
            [s.mean for s in points],
            yerr=[s.std for s in points],
            marker='o',
            capsize=3,
            label=label,
        )
    if axis == 'lambda':
        ax.set_xscale('log')
    ax.set_xlabel('lambda (distillation weight)' if axis == 'lambda' else axis)
    ax.set_ylabel('top-1 (%)')
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def draw_bars(results):
    """Fig.-4-style bars: per operator and setting, the top-1 without
    distillation with the distillation gain stacked on top; the softmax
    reference as a dashed line. One panel per target dataset."""
    plt = _pyplot()
    table = summarise(results)
    targets = sorted({s.dataset for s in table})
    fig, axes = plt.subplots(
        1, len(targets), figsize=(7 * len(targets), 4), squeeze=False
    )
    for ax, target in zip(axes[0], targets):
        entries = [s for s in table if s.dataset == target]
        softmax = [s.mean for s in entries if s.setting == SOFTMAX]
        operators = sorted(
            {s.operator for s in entries if s.setting != SOFTMAX}
        )
        settings = [
            k for k in grid_settings() if any(s.setting == k for s in entries)
        ]
        width = 0.8 / max(len(operators), 1)
        for i, op in enumerate(operators):
            base, gain, xs = [], [], []
            for j, setting in enumerate(settings):
                own = [
                    s
                    for s in entries
                    if s.operator == op and s.setting == setting
                ]
                plain = [s.mean for s in own if not s.distill]
                dist = [s.mean for s in own if s.distill]
                if not plain and not dist:
                    continue
                low = plain[0] if plain else 0.0
                xs.append(j + i * width)
                base.append(low)
                gain.append(max(dist) - low if dist else 0.0)
            bars = ax.bar(xs, base, width, label=f'{op} w/o distill')
            ax.bar(
                xs,
                gain,
                width,
                bottom=base,
                alpha=0.45,
                color=bars.patches[0].get_facecolor() if bars else None,
                hatch='//',
                label=f'{op} w/ distill (hatched: gain)',
            )
        if softmax:
            ax.axhline(softmax[0], ls='--', color='k', label='softmax')
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(settings))])
        ax.set_xticklabels(settings)
        ax.set_ylabel('top-1 (%)')
        ax.set_title(target)
        values = [s.mean for s in entries]
        if values:
            ax.set_ylim(max(0, min(values) - 10), min(100, max(values) + 3))
        ax.legend(fontsize=7, loc='upper left', ncol=2)
    fig.tight_layout()
    return fig
