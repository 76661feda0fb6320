"""The recipe study's results: per arm and operator the top-1 over seeds,
its cost, and its difference from the arm it is compared with, in points
and in pooled standard deviations; as a Markdown table and a plot."""

from dataclasses import dataclass

from ..figures import STD_LABEL, pyplot, save_figure
from ..summary import cell, gain, mean_std
from .recipes import ARMS

# |difference| / pooled std from which an arm is called better or worse.
CLEAR = 2.0


@dataclass(frozen=True)
class ArmSummary:
    """One arm on one operator over its seeds."""

    arm: str
    operator: str
    stages: str
    mean: float
    std: float
    n: int
    top1: tuple
    wall_s: float
    peak_mib: float
    softmax_blocks: str


def summarise(rows) -> dict:
    """{(arm, operator): ArmSummary} of the CSV rows, in ARMS order."""
    groups = {}
    for row in rows:
        groups.setdefault((row['arm'], row['operator']), []).append(row)
    ordered = sorted(groups, key=lambda k: (list(ARMS).index(k[0]), k[1]))
    table = {}
    for key in ordered:
        group = groups[key]
        top1 = [float(r['top1']) for r in group]
        mean, std = mean_std(top1)
        blocks = sorted(
            {r['softmax_blocks'] for r in group if r['softmax_blocks']}
        )
        table[key] = ArmSummary(
            *key,
            stages=group[0]['stages'],
            mean=mean,
            std=std,
            n=len(group),
            top1=tuple(top1),
            wall_s=sum(float(r['wall_s']) for r in group) / len(group),
            peak_mib=max(float(r['peak_rss_mib']) for r in group),
            softmax_blocks=' / '.join(blocks),
        )
    return table


def verdict(summary, reference) -> tuple[str, str]:
    """The difference from ``reference`` (points and pooled stds) and its
    verdict; ('-', 'baseline') without a reference."""
    if reference is None:
        return '-', 'baseline'
    delta, ratio = gain(summary, reference)
    if ratio is None:
        return f'{delta:+.2f}', 'no spread to judge by'
    word = 'no clear difference'
    if abs(ratio) >= CLEAR:
        word = 'better' if delta > 0 else 'worse'
    return f'{delta:+.2f} ({ratio:+.2f} std)', word


def markdown(table: dict) -> str:
    """The study's table: one row per arm and operator."""
    lines = [
        '| arm | operator | epochs per stage | top-1 (%) | vs | difference '
        '(pooled std) | verdict | wall s / run | peak RSS MiB |',
        '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ]
    for (arm, operator), s in table.items():
        reference = ARMS[arm].reference
        if reference and (reference, operator) not in table:
            difference, word = '-', 'reference not run'
        else:
            difference, word = verdict(
                s, table.get((reference, operator)) if reference else None
            )
        blocks = f' (block {s.softmax_blocks})' if s.softmax_blocks else ''
        lines.append(
            f'| {arm}{blocks} | {operator} | {s.stages} | {cell(s)} | '
            f'{reference or "-"} | {difference} | {word} | {s.wall_s:.0f} | '
            f'{s.peak_mib:.0f} |'
        )
    return '\n'.join(lines) + '\n'


def plot(table: dict, path: str) -> None:
    """Top-1 per arm (mean +- std, the seeds as dots), one row per arm and
    operator, the paper's recipe as a dashed line per operator."""
    plt = pyplot()
    keys = list(table)
    fig, ax = plt.subplots(
        figsize=(7.5, 0.4 * len(keys) + 1.2), layout='constrained'
    )
    ys = range(len(keys), 0, -1)
    for y, key in zip(ys, keys):
        s = table[key]
        ax.plot(s.top1, [y] * s.n, 'o', ms=3, color='tab:blue', alpha=0.5)
        ax.errorbar(s.mean, y, xerr=s.std, fmt='D', color='k', ms=4)
        if key[0] == 'paper':
            ax.axvline(s.mean, ls='--', lw=0.8, color='grey')
    ax.set_yticks(list(ys), [f'{arm} ({op})' for arm, op in keys])
    ax.set_xlabel('top-1 (%) on the Fashion-MNIST test split')
    ax.set_title(
        f'mean +- {STD_LABEL} (black), seeds (dots); dashed: the paper arm',
        fontsize=8,
    )
    save_figure(fig, path)
