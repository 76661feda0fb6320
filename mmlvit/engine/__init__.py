from . import hooks, optimizers, pretrained_init, runners  # noqa: F401
