"""mmlvit: linear-attention Vision Transformers for MMPretrain.

Importing the package registers its modules in mmpretrain's registries and
makes mmengine checkpoints load safely under torch's ``weights_only`` default.
"""

from . import checkpoint
from .version import __version__

checkpoint.install()

from . import datasets, engine, evaluation, models, transfer  # noqa: E402,F401

__all__ = ['__version__']
