"""The CSV a grid keeps its results in, and what every run record shares.

One row per finished run, appended as soon as it is known and read back to
resume a grid and to report on it. Files are written by :mod:`csv` with its
default dialect; the first columns of a row are its run's key (the run's
fields, in order), the others its results. A task's records name their
columns; the committed ``results/*.csv`` fix them.

A result column added later is optional (``metadata['optional']``): a
row of a CSV without it reads as None there, and a record holding None
writes no such cell. A new file's header leaves out the optional columns
its first row lacks (a CSV rewritten from old records keeps its bytes);
appending a row with a column the file's header lacks first rewrites the
file under the wider header, the older rows empty in that column.
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


def _header(path: str):
    """The column names of the CSV at ``path`` (None if there is no
    file)."""
    if not osp.isfile(path):
        return None
    with open(path, newline='') as f:
        return next(csv.reader(f), [])


def append_row(path: str, row: dict, columns: tuple, optional=()) -> None:
    """Append one row (column -> string) to the CSV with ``columns``,
    writing the header to a new file; ``optional`` columns are in a new
    file's header only if ``row`` has them. A file whose header lacks a
    column of ``row`` is first rewritten with it (empty in older rows)."""
    header = _header(path)
    if header is None:
        header = [c for c in columns if c in row or c not in optional]
        _write(path, header, [])
    missing = [c for c in row if c not in header]
    if missing:
        wider = [c for c in columns if c in header or c in row]
        wider += [c for c in header if c not in wider]
        _write(path, wider, read_rows(path))
        header = wider
    with open(path, 'a', newline='') as f:
        csv.DictWriter(f, fieldnames=header).writerow(row)


def _write(path: str, header: list, rows: list) -> None:
    """Replace the CSV at ``path`` by ``header`` and ``rows`` (missing
    cells empty), atomically."""
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    partial = path + '.partial'
    with open(partial, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(partial, path)


def read_results(path: str, result_type: type) -> list:
    """The results kept in the CSV at ``path`` (none if there is no file),
    each read by ``result_type.from_row``."""
    return [result_type.from_row(row) for row in read_rows(path)]


def append_result(path: str, result) -> None:
    """Append ``result.row()`` to the CSV with its type's ``columns()``."""
    kind = type(result)
    append_row(path, result.row(), kind.columns(), kind.optional_columns())


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

    @classmethod
    def optional_columns(cls) -> tuple:
        """The columns of the fields marked ``metadata['optional']``."""
        return tuple(
            f.name for f in cls._result_fields() if f.metadata.get('optional')
        )

    def row(self) -> dict:
        """The CSV row: column -> string (no cell for an optional field
        that is None)."""
        row = self.run.key_row()
        for f in self._result_fields():
            value, spec = getattr(self, f.name), f.metadata.get('format', '')
            if value is None and f.metadata.get('optional'):
                continue
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
            elif f.metadata.get('optional') and not row.get(f.name):
                values[f.name] = None
            else:
                values[f.name] = _parse(f.type, row[f.name])
        return cls(cls.RUN.from_row(row), **values)
