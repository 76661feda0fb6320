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
