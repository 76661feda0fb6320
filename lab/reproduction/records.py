"""The CSV a grid keeps its results in, and what every run record shares.

One row per finished run, appended as soon as it is known and read back to
resume a grid and to report on it. Files are written by :mod:`csv` with its
default dialect; the first columns of a row are its run's key (the run's
fields, in order), the others its results. A task's records name their
columns; the committed ``results/*.csv`` fix them.
"""

import csv
import os
import os.path as osp
from dataclasses import fields


def read_rows(path: str) -> list:
    """The rows of the CSV at ``path`` as dicts of column strings (none if
    there is no file)."""
    if not osp.isfile(path):
        return []
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


def append_row(path: str, row: dict, columns: tuple) -> None:
    """Append one row (column -> string) to the CSV with ``columns``,
    writing the header to a new file."""
    new = not osp.isfile(path)
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    with open(path, 'a', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        if new:
            writer.writeheader()
        writer.writerow(row)


def read_results(path: str, result_type: type) -> list:
    """The results kept in the CSV at ``path`` (none if there is no file),
    each read by ``result_type.from_row``."""
    return [result_type.from_row(row) for row in read_rows(path)]


def append_result(path: str, result) -> None:
    """Append ``result.row()`` to the CSV with its type's ``columns()``."""
    append_row(path, result.row(), type(result).columns())


def _parse(kind, text):
    return bool(int(text)) if kind is bool else kind(text)


class GridRun:
    """What a run record of any task shares; mixed into a frozen dataclass
    whose fields are the run's key columns, ``seed`` last, and whose
    ``CONFIGURATION`` is the dataclass of every field but the seed (what
    tables and plots pool seeds over).

    A field's ``metadata['column']`` names its column when that differs
    from the field's name; :meth:`column_text` writes a value (booleans as
    0 / 1).
    """

    CONFIGURATION = None

    @classmethod
    def key_columns(cls) -> tuple:
        """The CSV columns of the run's key, in order."""
        return tuple(f.metadata.get('column', f.name) for f in fields(cls))

    def column_text(self, name: str) -> str:
        """The CSV text of the field ``name``."""
        value = getattr(self, name)
        return str(int(value)) if isinstance(value, bool) else str(value)

    def key(self) -> tuple:
        """What identifies the run in the CSV: the strings of its columns."""
        return tuple(self.column_text(f.name) for f in fields(self))

    def key_row(self) -> dict:
        """The key columns of the run's CSV row: column -> string."""
        return dict(zip(self.key_columns(), self.key()))

    @property
    def name(self) -> str:
        """The run's work-directory name: its key joined by ``_``, ``+``
        spelled ``-``."""
        return '_'.join(self.key()).replace('+', '-')

    def configuration(self):
        """The run without its seed (a ``CONFIGURATION``)."""
        names = [f.name for f in fields(self.CONFIGURATION)]
        return self.CONFIGURATION(*(getattr(self, n) for n in names))

    @classmethod
    def from_row(cls, row: dict):
        """The run of a CSV row (a dict of column strings)."""
        return cls(
            **{
                f.name: _parse(f.type, row[f.metadata.get('column', f.name)])
                for f in fields(cls)
            }
        )


class GridResult:
    """What a result record of any task shares; mixed into a frozen
    dataclass whose first field is ``run`` (a :class:`GridRun` of type
    ``RUN``) and whose other fields are the results, each a column written
    with the format spec ``metadata['format']`` (``str`` without one). A
    dict field holds the columns ``metadata['columns']``, each written only
    when the dict has it (empty otherwise)."""

    RUN = None

    @classmethod
    def _result_fields(cls):
        return fields(cls)[1:]

    @classmethod
    def columns(cls) -> tuple:
        """Every CSV column: the run's key, then the results."""
        names = [f.metadata.get('columns', (f.name,)) for f in fields(cls)]
        return (
            *cls.RUN.key_columns(),
            *(c for group in names[1:] for c in group),
        )

    def row(self) -> dict:
        """The CSV row: column -> string."""
        row = self.run.key_row()
        for f in self._result_fields():
            value, spec = getattr(self, f.name), f.metadata.get('format', '')
            texts = value if isinstance(value, dict) else {f.name: value}
            row.update((c, format(v, spec)) for c, v in texts.items())
        return row

    @classmethod
    def from_row(cls, row: dict):
        """The result of a CSV row (a dict of column strings)."""
        values = {}
        for f in cls._result_fields():
            if f.type is dict:
                columns = [c for c in f.metadata['columns'] if row.get(c)]
                values[f.name] = {c: float(row[c]) for c in columns}
            else:
                values[f.name] = _parse(f.type, row[f.name])
        return cls(cls.RUN.from_row(row), **values)
