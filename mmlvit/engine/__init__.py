from . import atomic_files, conversion_optim, hooks, optim_wrapper  # noqa: F401

atomic_files.install()
