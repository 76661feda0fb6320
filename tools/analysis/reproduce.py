"""Small-scale reproduction of the paper's classification result matrix
(docs/reproduction.md): the command line of
:mod:`lab.reproduction.classification.cli`, whose docstring gives the
options and examples.

    python tools/analysis/reproduce.py --operators relu gla \\
        --settings random attncopy mlpcopy fullcopy softmax --distill both \\
        --seeds 0 1 2 --out results/fashion_mnist.csv
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab.reproduction.classification.cli import main

if __name__ == '__main__':
    main()
