"""The lab beside the product: the device-aware benchmark core
(``lab.benchmarks``) and the small-scale reproduction engine
(``lab.reproduction``). Not installed with mmlvit; the tools in
``tools/analysis/`` and the tests import it from the repository root."""
