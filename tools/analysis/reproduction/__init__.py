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
"""
