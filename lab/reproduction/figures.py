"""What every grid's plots share: headless pyplot, the std over seeds as
error bars, the softmax reference as a dashed line, saving a figure."""

STD_LABEL = 'std over seeds'


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str) -> None:
    """Write ``fig`` to ``path`` (120 dpi) and close it."""
    fig.savefig(path, dpi=120)
    pyplot().close(fig)


def seed_error_bars(ax, xs, summaries, **style) -> None:
    """The std over seeds as black error bars at the means of the
    summaries (``mean``, ``std``, seed count ``n``) with more than one
    seed; ``None`` summaries are skipped; ``style`` adds errorbar keywords
    (cap size, line width)."""
    points = [(x, s) for x, s in zip(xs, summaries) if s and s.n > 1]
    if points:
        ax.errorbar(
            [x for x, _ in points],
            [s.mean for _, s in points],
            yerr=[s.std for _, s in points],
            fmt='none',
            ecolor='k',
            label=STD_LABEL,
            **style,
        )


def softmax_reference(ax, ref, band_label=None) -> None:
    """The softmax reference's mean as a dashed black line, its std over
    seeds (if more than one) as a shaded band labelled ``band_label``."""
    ax.axhline(ref.mean, ls='--', color='k', label='softmax')
    if ref.n > 1:
        ax.axhspan(
            ref.mean - ref.std,
            ref.mean + ref.std,
            color='k',
            alpha=0.1,
            lw=0,
            label=band_label,
        )


def panel_row(count: int, width: float, margin: float, height: float):
    """A figure of ``count`` panels side by side (``width`` inches each,
    plus ``margin`` for the legend), constrained layout; returns the figure
    and its list of axes."""
    fig, axes = pyplot().subplots(
        1,
        count,
        figsize=(width * count + margin, height),
        squeeze=False,
        layout='constrained',
    )
    return fig, list(axes[0])


def legend_right(fig, axes, last=None) -> None:
    """One legend for every panel, outside to the right: each label once,
    in the order first drawn, ``last`` (a label) moved to the end."""
    entries = {}
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        entries.update(zip(labels, handles))
    if last in entries:
        entries[last] = entries.pop(last)
    fig.legend(
        entries.values(),
        entries.keys(),
        loc='outside right upper',
        fontsize=7,
    )
