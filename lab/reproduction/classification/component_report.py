"""The component grid's report: which copied weights carry the transfer.

A grid whose settings include component specs (``mlpcopy+norms``,
``fullcopy-attn``; ``mmlvit.transfer.specs``) is reported per target and
operator: each setting's top-1 over seeds, its gain over Random (without
distillation) in points and pooled standard deviations, and that gain as a
share of FullCopy's. Then the verdicts on the paper's two component claims
(Qin et al., arXiv:2609.35745), each a difference in pooled stds:

- "attention weights are operator-specific": FullCopy without the
  attention weights is not clearly worse than FullCopy;
- "MLPs carry the transfer": FullCopy without the MLPs is clearly worse
  than FullCopy, and MLPs + norms + embeddings (= FullCopy without
  attention) clearly better than Random.

"Clearly" is a difference of at least ``CLEAR`` pooled stds (as the recipe
study). Settings are found by the components they copy, however spelled.
"""

from collections import defaultdict

from mmlvit.transfer import SETTINGS, components_text, is_preset, spec_policy

from ..configs import SOFTMAX, setting_title
from ..figures import (
    STD_LABEL,
    legend_right,
    panel_row,
    save_figure,
    seed_error_bars,
)
from ..summary import cell, gain
from .recipe_report import CLEAR
from .report import summarise

FULL = frozenset(SETTINGS['FullCopy'].components)
# The component sets of the settings the claims compare.
ROLES = {
    'Random': frozenset(),
    'FullCopy': FULL,
    'FullCopy - attention': FULL - {'attn_qkv', 'attn_proj'},
    'FullCopy - MLPs': FULL - {'mlp'},
}
# (claim, setting, reference, what the claim expects of the difference).
CLAIMS = (
    (
        'attention weights are operator-specific',
        'FullCopy - attention',
        'FullCopy',
        'no loss',
    ),
    ('MLPs carry the transfer', 'FullCopy - MLPs', 'FullCopy', 'loss'),
    ('MLPs carry the transfer', 'FullCopy - attention', 'Random', 'gain'),
)
EXPECTED = {
    'no loss': 'not clearly worse',
    'loss': 'clearly worse',
    'gain': 'clearly better',
}


def is_component_grid(results) -> bool:
    """Whether any result's setting is a component spec (not a setting's
    bare short name, not the softmax reference)."""
    return any(
        r.run.setting != SOFTMAX and not is_preset(r.run.setting)
        for r in results
    )


def _copied(setting: str) -> frozenset:
    return frozenset(spec_policy(setting).components)


def title(s) -> str:
    """A summary's row name: ``'FullCopy - attn + distill'``."""
    return setting_title(s.setting) + (' + distill' if s.distill else '')


def tables(results) -> dict:
    """{(dataset, operator): [Summary, ...]}: the linear students' seed
    summaries per target and operator, settings in the order the CSV first
    holds them, distilled rows after the others.

    Raises:
        SystemExit: The results hold several schedules or lambdas (the
            report compares settings at one).
    """
    table = [s for s in summarise(results) if s.setting != SOFTMAX]
    for axis, label in (('epochs', 'schedule'), ('lam', 'lambda')):
        values = {
            getattr(s, axis) for s in table if axis == 'epochs' or s.distill
        }
        if len(values) > 1:
            raise SystemExit(
                f'The component report compares settings at one {label}; '
                f'the CSV holds {axis} {sorted(values)}. Keep each in its '
                'own CSV (--out).'
            )
    order = list(dict.fromkeys(r.run.setting for r in results))
    grouped = defaultdict(list)
    for s in sorted(table, key=lambda s: (s.distill, order.index(s.setting))):
        grouped[(s.dataset, s.operator)].append(s)
    return dict(sorted(grouped.items()))


def role(summaries, name: str, distill: bool = False):
    """The summary among ``summaries`` (one target and operator) whose
    setting copies the components of ``ROLES[name]``, or None."""
    for s in summaries:
        if s.distill == distill and _copied(s.setting) == ROLES[name]:
            return s
    return None


def gain_cells(s, random, full) -> tuple[str, str]:
    """(gain over ``random`` in points and pooled stds, that gain as a
    share of ``full``'s); '-' where there is no reference."""
    if random is None or s is random:
        return '-', '-'
    delta, ratio = gain(s, random)
    points = f'{delta:+.2f}'
    if ratio is not None:
        points += f' ({ratio:+.1f} std)'
    if full is None or full.mean == random.mean:
        return points, '-'
    return points, f'{100 * delta / (full.mean - random.mean):.0f} %'


def verdict(s, reference, expect: str) -> tuple[str, str]:
    """(difference in points and pooled stds, verdict) of ``s`` against
    ``reference`` for a claim expecting ``expect`` ('no loss', 'loss' or
    'gain' of at least ``CLEAR`` pooled stds)."""
    if s is None or reference is None:
        return '-', 'not run'
    delta, ratio = gain(s, reference)
    if ratio is None:
        return f'{delta:+.2f}', 'no spread to judge by'
    holds = {
        'no loss': ratio > -CLEAR,
        'loss': ratio <= -CLEAR,
        'gain': ratio >= CLEAR,
    }[expect]
    return f'{delta:+.2f} ({ratio:+.2f} std)', (
        'holds' if holds else 'does not hold'
    )


def recorded_components(results) -> dict:
    """{(dataset, operator, setting, distill): components text}: what the
    CSV recorded, else what the setting copies (older CSVs)."""
    texts = {}
    for r in results:
        key = (r.run.dataset, r.run.operator, r.run.setting, r.run.distill)
        if r.run.setting != SOFTMAX:
            texts[key] = r.components or components_text(
                spec_policy(r.run.setting).components
            )
    return texts


def markdown(results, source: str = '') -> str:
    """The report: per target and operator a table of the settings, then
    the verdicts."""
    copied = recorded_components(results)
    lines = [
        '# Which copied weights carry the transfer'
        + (f' ({source})' if source else ''),
        '',
        "Top-1 (%) on the target's test split, mean +- std (seeds). Gains "
        'are over Random without distillation, in points and pooled '
        "standard deviations; the share is of FullCopy's gain (without "
        f'distillation). A claim is judged by differences of {CLEAR:g} '
        'pooled stds or more.',
    ]
    grouped = tables(results)
    for (dataset, operator), summaries in grouped.items():
        random, full = role(summaries, 'Random'), role(summaries, 'FullCopy')
        lines += [
            '',
            f'## {dataset}, {operator}',
            '',
            '| setting | copied components | top-1 (%) | gain over Random '
            "| share of FullCopy's gain |",
            '| --- | --- | --- | --- | --- |',
        ]
        for s in summaries:
            points, share = gain_cells(s, random, full)
            components = copied[(dataset, operator, s.setting, s.distill)]
            lines.append(
                f'| {title(s)} | {components} | {cell(s)} | {points} | '
                f'{share} |'
            )
    lines += [
        '',
        '## Verdicts',
        '',
        '| target | operator | claim | comparison | expected | difference '
        '(pooled std) | verdict |',
        '| --- | --- | --- | --- | --- | --- | --- |',
    ]
    for (dataset, operator), summaries in grouped.items():
        for claim, setting, reference, expect in CLAIMS:
            for distill in (False, True):
                s = role(summaries, setting, distill)
                ref = role(summaries, reference, distill)
                if distill and (s is None or ref is None):
                    continue  # distilled rows only where both were run
                with_distill = ' (w/ distill)' if distill else ''
                difference, word = verdict(s, ref, expect)
                lines.append(
                    f'| {dataset} | {operator} | {claim} | {setting} vs '
                    f'{reference}{with_distill} | {EXPECTED[expect]} | '
                    f'{difference} | {word} |'
                )
    return '\n'.join(lines) + '\n'


def plot(results, path: str) -> None:
    """Top-1 per setting (mean, std over seeds as error bars), one panel per
    target, one bar colour per operator; each operator's FullCopy and Random
    means as lines of its colour (dotted, dash-dot)."""
    grouped = tables(results)
    targets = sorted({dataset for dataset, _ in grouped})
    fig, axes = panel_row(len(targets), 6.5, 2.0, 4.5)
    for ax, target in zip(axes, targets):
        operators = [op for dataset, op in grouped if dataset == target]
        labels = list(
            dict.fromkeys(
                title(s) for op in operators for s in grouped[(target, op)]
            )
        )
        width = 0.8 / len(operators)
        for i, op in enumerate(operators):
            summaries = grouped[(target, op)]
            xs = [labels.index(title(s)) + i * width for s in summaries]
            bars = ax.bar(xs, [s.mean for s in summaries], width, label=op)
            color = bars.patches[0].get_facecolor()
            seed_error_bars(ax, xs, summaries, capsize=2)
            for name, style in (('FullCopy', ':'), ('Random', '-.')):
                s = role(summaries, name)
                if s is not None:
                    ax.axhline(s.mean, ls=style, lw=0.8, color=color)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(labels))])
        ax.set_xticklabels(labels, rotation=30, ha='right', fontsize=7)
        ax.set_ylabel('top-1 (%), mean +- std over seeds')
        ax.set_title(f'{target} (dotted: FullCopy, dash-dot: Random)')
        entries = [s for op in operators for s in grouped[(target, op)]]
        low = min(s.mean - s.std for s in entries)
        top = max(s.mean + s.std for s in entries)
        ax.set_ylim(max(0, low - 5), min(100, top + 2))
    legend_right(fig, axes, last=STD_LABEL)
    save_figure(fig, path)
