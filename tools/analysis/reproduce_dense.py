"""Small-scale dense reproduction (docs/dense_reproduction.md): the command
line of :mod:`lab.reproduction.dense.cli`, whose docstring gives the
options and examples.

    OMP_NUM_THREADS=1 python tools/analysis/reproduce_dense.py \\
        --seeds 0 1 2 --jobs 2 --threads 1 \\
        --out results/dense_fashion_mnist.csv
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab.reproduction.dense.cli import main

if __name__ == '__main__':
    main()
