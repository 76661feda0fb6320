"""Figures of the benchmarks (matplotlib, Agg backend)."""


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    return plt


def log2_size_axes(ax, sizes, title, xlabel, ylabel=None):
    """Log-2 x axis ticked at ``sizes``, log y axis with plain numbers."""
    plt = pyplot()
    from matplotlib.ticker import ScalarFormatter

    ax.set_xscale('log', base=2)
    ax.set_xticks(sizes, [str(size) for size in sizes])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(True, which='both', alpha=0.3)


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)


def line_panels(path, panels, columns=1, panel_size=(5.5, 4), title=None):
    """Save a grid of line plots, one per panel.

    Args:
        path (str): The figure file.
        panels (list[dict]): Each with ``series`` ({label: [(x, y)]}; an
            empty one is left out) and optionally ``styles`` ({label:
            plot kwargs}), ``title``, ``xlabel``, ``ylabel``, ``sizes``
            (x ticks on a log-2 axis, see :func:`log2_size_axes`; else a
            log-10 x axis), ``ybase`` (the log base of y, 10 by default),
            ``hlines`` ([(y, plot kwargs)]) and ``legend`` (default: if
            a series has points).
        columns (int): Panels per row.
        panel_size (tuple): Inches of one panel.
        title (str, optional): The figure's title.
    """
    plt = pyplot()
    from matplotlib.ticker import LogLocator, ScalarFormatter

    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(panel_size[0] * columns, panel_size[1] * rows),
        squeeze=False,
    )
    for ax, panel in zip(axes.flat, panels):
        for label, points in panel['series'].items():
            if points:
                style = dict(marker='o', label=label)
                style.update(panel.get('styles', {}).get(label, {}))
                ax.plot(*zip(*sorted(points)), **style)
        for y, style in panel.get('hlines', ()):
            ax.axhline(y, **style)
        ax.set_yscale('log', base=panel.get('ybase', 10))
        if panel.get('sizes'):
            labels = (panel.get('title', ''), panel.get('xlabel'),
                      panel.get('ylabel'))  # fmt: skip
            log2_size_axes(ax, panel['sizes'], *labels)
        else:
            ax.set_xscale('log')
            ax.set_title(panel.get('title', ''))
            ax.set_xlabel(panel.get('xlabel'))
            ax.set_ylabel(panel.get('ylabel'))
            ax.grid(True, which='both', alpha=0.3)
        if panel.get('ybase', 10) == 10:
            ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
            ax.yaxis.set_minor_formatter(ScalarFormatter())
        drawn = any(panel['series'].values())
        if panel.get('legend', drawn):
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    save(fig, path)
