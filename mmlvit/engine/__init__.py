from mmlvit.checkpoint import atomic_files

from . import hooks, optimizers, pretrained_init, runners  # noqa: F401

atomic_files.install()
