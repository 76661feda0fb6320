"""The copy report: what an init did to every tensor."""

import re
from collections import Counter
from dataclasses import dataclass

from .components import COMPONENTS, OTHER, component_of
from .errors import preview_keys
from .settings import Policy


@dataclass
class Record:
    """What happened to one tensor (or part of one).

    ``action`` is ``'copied'``, ``'analytical'``, ``'default'`` (a student
    tensor left at its fresh init) or ``'skipped'`` (a checkpoint tensor of
    a requested component that was not copied); ``numel`` counts the
    parameters concerned.
    """

    key: str
    component: str
    action: str
    numel: int
    reason: str = ''


class CopyReport:
    """The outcome of :func:`apply_init`, tensor by tensor.

    Args:
        policy (Policy): The policy applied.
        records (list[Record]): One per student tensor (two for a partly
            copied ``qkv``) plus one per skipped checkpoint tensor.
        unused (list[str]): Checkpoint keys nothing used.
    """

    ACTIONS = ('copied', 'analytical', 'default', 'skipped')

    def __init__(
        self, policy: Policy, records: list[Record], unused: list[str]
    ) -> None:
        self.policy = policy
        self.records = records
        self.unused = unused

    def keys(self, action: str) -> list[str]:
        """Keys of the records with this action."""
        return [r.key for r in self.records if r.action == action]

    def table(self) -> str:
        """A text table: per component, tensors/parameters per action; then
        every tensor with a note (partly copied, resized, skipped, kept at
        default for a reason) and the unused checkpoint keys."""
        names = [
            c
            for c in COMPONENTS + (OTHER,)
            if any(r.component == c for r in self.records)
        ]
        header = ['component'] + list(self.ACTIONS)
        rows = [header]
        for name in names:
            row = [name]
            for action in self.ACTIONS:
                hits = [
                    r
                    for r in self.records
                    if r.component == name and r.action == action
                ]
                numel = sum(r.numel for r in hits)
                row.append(f'{len(hits)} / {numel:,}' if hits else '-')
            rows.append(row)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [
            f'Softmax-to-linear init: setting={self.policy.setting.name}, '
            f'copied components={list(self.policy.components)} '
            '(cells: tensors / parameters)'
        ]
        lines += [
            '  '.join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
            for row in rows
        ]
        # Notes; the same note of several layers on one line.
        notes = {}
        for r in self.records:
            if r.reason:
                key = re.sub(r'layers\.\d+\.', 'layers.*.', r.key)
                notes.setdefault((r.action, key, r.reason), []).append(r.key)
        for (action, key, reason), keys in notes.items():
            if len(keys) == 1:
                lines.append(f'{action}: {keys[0]}: {reason}')
            else:
                lines.append(
                    f'{action}: {key} ({len(keys)} tensors): {reason}'
                )
        wanted = set(self.policy.components)
        orphans = [k for k in self.unused if component_of(k) in wanted]
        if orphans:
            lines.append(
                f'unused, no counterpart in the student: '
                f'{preview_keys(orphans)}'
            )
        others = Counter(
            component_of(k)
            for k in self.unused
            if component_of(k) not in wanted
        )
        if others:
            lines.append(
                'unused, component not requested: '
                + ', '.join(
                    f'{name} ({n} tensors)' for name, n in others.items()
                )
            )
        return '\n'.join(lines)
