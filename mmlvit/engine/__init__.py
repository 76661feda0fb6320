from . import atomic_files, hooks, optim_wrapper  # noqa: F401

atomic_files.install()
