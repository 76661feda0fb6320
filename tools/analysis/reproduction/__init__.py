"""The small-scale reproduction behind ``tools/analysis/reproduce.py``
(docs/reproduction.md), one module per job:

- :mod:`.records`: one run and its result as named records, and the CSV they
  are kept in (append, read back, resume);
- :mod:`.configs`: the operators and settings a grid may name, and the
  mmengine config of one run;
- :mod:`.runner`: the grid of runs, the teacher, training the runs in
  worker processes;
- :mod:`.report`: the summary over seeds and its text tables;
- :mod:`.plots`: the Fig.-4-style bars and the lambda / epochs sweep plots.

The dense grid behind ``tools/analysis/reproduce_dense.py``
(docs/dense_reproduction.md) reuses the CSV helpers, the worker pool, the
schedule and the seed statistics, with its own

- :mod:`.dense_records`: one dense run and its result (mIoU, box / mask
  AP) as named records and CSV rows;
- :mod:`.dense_configs`: the ready-made UperNet / Mask R-CNN config of a
  run on a small Dense Fashion-MNIST set, and that set;
- :mod:`.dense_runner`: the grid of runs, trained and tested in workers;
- :mod:`.dense_report`: mean +- std over seeds, gains over Random;
- :mod:`.dense_plots`: a bar panel per metric.
"""
