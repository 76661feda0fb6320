"""The summary of a classification grid's results over seeds and its text
tables: the plain table printed after a grid and the Markdown of
``--report`` (a settings matrix in the layout of the paper's Tables 2-3, or
one line per configuration for a lambda / epochs sweep)."""

from collections import defaultdict
from dataclasses import astuple, dataclass

from ..configs import SOFTMAX, grid_settings
from ..summary import cell, mean_std
from .records import Configuration


@dataclass(frozen=True)
class Summary(Configuration):
    """Top-1 of one run configuration over its seeds: ``mean``, ``std`` (0
    with one seed) and the seed count ``n``."""

    mean: float
    std: float
    n: int


def summarise(results) -> list:
    """One :class:`Summary` per run configuration (seeds pooled), sorted by
    dataset, operator, setting, distillation, lambda and epochs."""
    groups = defaultdict(list)
    for result in results:
        groups[result.run.configuration()].append(result.top1)
    table = []
    for config, values in sorted(groups.items(), key=lambda i: astuple(i[0])):
        table.append(Summary(*astuple(config), *mean_std(values), len(values)))
    return table


def sweep_axis(table):
    """'epochs' or 'lambda' when the summaries sweep that axis (epochs
    first), else None: a plain settings grid."""
    if len({s.epochs for s in table}) > 1:
        return 'epochs'
    if len({s.lam for s in table if s.distill}) > 1:
        return 'lambda'
    return None


def print_table(results) -> None:
    table = summarise(results)
    # The setting column fits the longest name (component specs are long).
    w = max([9, *(len(s.setting) for s in table)])
    print(
        f'{"dataset":18} {"operator":9} {"setting":{w}} {"distill":7} '
        f'{"lambda":>6} {"epochs":>6} {"top1 mean":>9} {"std":>5} {"n":>2}'
    )
    for s in table:
        print(
            f'{s.dataset:18} {s.operator:9} {s.setting:{w}} '
            f'{"yes" if s.distill else "no":7} {s.lam:6g} {s.epochs:6d} '
            f'{s.mean:9.2f} {s.std:5.2f} {s.n:2d}'
        )


def _with(distill):
    return 'w/' if distill else 'w/o'


def print_markdown(results) -> None:
    """The summary as Markdown: top-1 mean +- std (seeds). A settings grid
    (one lambda, one schedule) is a matrix with a row per dataset, operator
    and distillation and a column per setting; a sweep is one line per
    configuration."""
    table = summarise(results)
    if sweep_axis(table):
        print(
            '| dataset | operator | setting | distill | lambda | epochs | '
            'top-1 (%) (seeds) |'
        )
        print('| --- | --- | --- | --- | --- | --- | --- |')
        for s in table:
            print(
                f'| {s.dataset} | {s.operator} | {s.setting} | '
                f'{_with(s.distill)} | {s.lam:g} | {s.epochs} | {cell(s)} |'
            )
        return
    known = grid_settings()
    settings = [k for k in known if any(s.setting == k for s in table)]
    cells = {(s.dataset, s.operator, s.setting, s.distill): s for s in table}
    print(
        '| dataset | operator | distill | '
        + ' | '.join(known[k].name for k in settings)
        + ' |'
    )
    print('| --- | --- | --- |' + ' --- |' * len(settings))
    lines = sorted(
        {
            (s.dataset, s.operator, s.distill)
            for s in table
            if s.setting != SOFTMAX
        }
    )
    for dataset, operator, distill in lines:
        values = [
            cell(cells[key]) if key in cells else '-'
            for key in ((dataset, operator, k, distill) for k in settings)
        ]
        print(
            f'| {dataset} | {operator} | {_with(distill)} | '
            + ' | '.join(values)
            + ' |'
        )
    for (dataset, _, setting, _), s in cells.items():
        if setting == SOFTMAX:
            print(
                f'| {dataset} | softmax (fine-tuned reference) | w/o | '
                + cell(s)
                + ' |' * len(settings)
            )
