"""The small-scale reproduction engine (docs/reproduction.md,
docs/dense_reproduction.md): a grid of runs (task x operator x setting x
seed), each a real mmengine Runner that trains and then tests once, every
result appended to a CSV as soon as it is known, a re-run resuming from the
rows already there, tables and plots from the CSV.

The engine, shared by every task:

- :mod:`.records`: the CSV (read, append) and the run record's columns;
- :mod:`.configs`: the repository paths, the short schedule, the final
  test;
- :mod:`.runner`: training and testing one config, the grid in worker
  processes with progress;
- :mod:`.summary`: seed statistics, table cells, the teacher's line;
- :mod:`.figures`: pyplot, seed error bars, saving a figure;
- :mod:`.cli`: the options every grid takes and the run-what-is-missing
  flow.

The tasks (each its configs, records, runner, report, plots and command
line): :mod:`.classification` (``tools/analysis/reproduce.py``) and
:mod:`.dense` (``tools/analysis/reproduce_dense.py``); :mod:`.data` makes
the dense task's data set.
"""
