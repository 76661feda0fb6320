from . import (  # noqa: F401
    atomic_files,
    conversion_optim,
    fsdp,
    hooks,
    layer_decay,
    loops,
    optim_wrapper,
    pretrained_init,
)

atomic_files.install()
