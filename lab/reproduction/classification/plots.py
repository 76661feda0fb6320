"""The classification grid's plots, written next to its CSV: bars in the
style of Fig. 4 of Qin et al. (arXiv:2609.35745; docs/reproduction.md) for
a settings grid, or top-1 against lambda / epochs for a sweep. Error bars
are the std over seeds wherever a configuration has more than one seed;
legends sit outside the axes."""

from collections import defaultdict

from ..configs import SOFTMAX, grid_settings
from ..figures import (
    STD_LABEL,
    legend_right,
    panel_row,
    pyplot,
    save_figure,
    seed_error_bars,
    softmax_reference,
)
from .report import summarise, sweep_axis

# The error bars at the tops of the bars.
BAR_STYLE = dict(elinewidth=1, capsize=2)


def _seed_std(summaries):
    """The error bars of ``summaries``: std where more than one seed, else
    0; None when no summary has more than one seed."""
    if all(s.n < 2 for s in summaries):
        return None
    return [s.std if s.n > 1 else 0.0 for s in summaries]


def plot_results(results, path):
    """Write the sweep plot when the results vary epochs or lambda, else the
    Fig.-4-style bars, to ``path``."""
    save_figure(draw(results), path)


def draw(results):
    """The figure :func:`plot_results` writes."""
    axis = sweep_axis(summarise(results))
    return draw_sweep(results, axis) if axis else draw_bars(results)


def draw_sweep(results, axis):
    """Top-1 (mean +- std over seeds) against ``axis`` ('epochs' or
    'lambda'), one line per dataset, operator, setting and distillation."""
    plt = pyplot()
    lines = defaultdict(list)
    for s in summarise(results):
        label = f'{s.dataset} {s.operator} {s.setting}' + (
            ' + distill' if s.distill else ''
        )
        lines[label].append(s)
    fig, ax = plt.subplots(figsize=(9, 4), layout='constrained')
    for label, points in sorted(lines.items()):
        points.sort(key=lambda s: s.epochs if axis == 'epochs' else s.lam)
        x = [s.epochs if axis == 'epochs' else s.lam for s in points]
        ax.errorbar(
            x,
            [s.mean for s in points],
            yerr=_seed_std(points),
            marker='o',
            capsize=3,
            label=label,
        )
    if axis == 'lambda':
        ax.set_xscale('log')
    ax.set_xlabel('lambda (distillation weight)' if axis == 'lambda' else axis)
    ax.set_ylabel('top-1 (%), mean +- std over seeds')
    fig.legend(loc='outside right upper', fontsize=7)
    return fig


def _bars(entries, operator, settings, width, offset):
    """Per setting with results for ``operator``: x, the summary without
    distillation and the best distilled one (either may be None)."""
    bars = []
    for j, setting in enumerate(settings):
        own = [
            s
            for s in entries
            if s.operator == operator and s.setting == setting
        ]
        plain = [s for s in own if not s.distill]
        distilled = [s for s in own if s.distill]
        if not own:
            continue
        bars.append(
            (
                j + offset,
                plain[0] if plain else None,
                max(distilled, key=lambda s: s.mean) if distilled else None,
            )
        )
    return bars


def _draw_operator(ax, op, bars, width):
    """One operator's bars: the top-1 without distillation, the change
    distillation brings stacked on it (hatched // where it gains, xx where
    it loses, down from the top), and the error bars."""
    xs = [x for x, _, _ in bars]
    base = [plain.mean if plain else 0.0 for _, plain, _ in bars]
    change = [
        dist.mean - low if dist else 0.0
        for (_, _, dist), low in zip(bars, base)
    ]
    drawn = ax.bar(xs, base, width, label=f'{op} w/o distill')
    color = drawn.patches[0].get_facecolor() if drawn else None
    for sign, hatch, label in (
        (1, '//', f'{op} w/ distill (hatched: gain)'),
        (-1, 'xx', f'{op} w/ distill (cross-hatched: loss)'),
    ):
        keep = [i for i, c in enumerate(change) if c * sign > 0]
        if keep:
            ax.bar(
                [xs[i] for i in keep],
                [change[i] for i in keep],
                width,
                bottom=[base[i] for i in keep],
                alpha=0.45,
                color=color,
                hatch=hatch,
                label=label,
            )
    seed_error_bars(ax, xs, [plain for _, plain, _ in bars], **BAR_STYLE)
    seed_error_bars(ax, xs, [dist for _, _, dist in bars], **BAR_STYLE)


def draw_bars(results):
    """Fig.-4-style bars: per operator and setting, the top-1 without
    distillation with the distillation gain stacked on top (hatched), the
    std over seeds as error bars at both tops; the softmax reference as a
    dashed line (its seed std shaded). One panel per target dataset, one
    legend to their right."""
    table = summarise(results)
    known = grid_settings()
    targets = sorted({s.dataset for s in table})
    fig, axes = panel_row(len(targets), 7, 2.5, 4.5)
    for ax, target in zip(axes, targets):
        entries = [s for s in table if s.dataset == target]
        softmax = [s for s in entries if s.setting == SOFTMAX]
        operators = sorted(
            {s.operator for s in entries if s.setting != SOFTMAX}
        )
        settings = [k for k in known if any(s.setting == k for s in entries)]
        width = 0.8 / max(len(operators), 1)
        for i, op in enumerate(operators):
            _draw_operator(
                ax, op, _bars(entries, op, settings, width, i * width), width
            )
        if softmax:
            softmax_reference(ax, softmax[0])
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(settings))])
        names = [known[k].name for k in settings]
        long = max(map(len, names), default=0) > 10
        ax.set_xticklabels(
            names, rotation=15 if long else 0, ha='right' if long else 'center'
        )
        ax.set_ylabel('top-1 (%), mean +- std over seeds')
        ax.set_title(target)
        tops = [s.mean + s.std for s in entries]
        if tops:
            low = min(s.mean - s.std for s in entries)
            ax.set_ylim(max(0, low - 10), min(100, max(tops) + 3))
    legend_right(fig, axes, last=STD_LABEL)
    return fig
