"""mmlvit: linear-attention Vision Transformers for MMPretrain.

Importing the package registers its modules in mmpretrain's registries and
installs its changes to mmengine and torch (:mod:`mmlvit.checkpoint.patches`:
checkpoints load safely under torch's ``weights_only`` default and are
written atomically).
"""

from .checkpoint import patches
from .version import __version__

patches.install()

from . import datasets, engine, evaluation, models, transfer  # noqa: E402,F401

__all__ = ['__version__']
