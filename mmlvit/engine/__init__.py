"""Training with mmengine, laid out like mmpretrain's engine.

- ``hooks/``: the Hook classes, one a file.
- ``optimizers/``: optimiser constructors (conversion-aware groups, layer
  decay) and optimiser wrappers (non-finite guard, mixed precision).
- ``runners/``: the Runner, training loops, FSDP and distributed glue.
- ``checkpoint_fit``, ``config_checks``, ``pretrained_init``,
  ``random_state``, ``resume_schedule``, ``stage_config``: what the hooks
  and tools use.

Checkpoint files themselves are :mod:`mmlvit.checkpoint`'s.
"""

from . import hooks, optimizers, pretrained_init, runners  # noqa: F401
