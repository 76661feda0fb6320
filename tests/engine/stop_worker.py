"""Test-only plugin: rank 1 stops itself (SIGSTOP) after a chosen training
iteration, as a hung worker would. Imported through ``custom_imports``;
configured with ``custom_hooks=[dict(type='StopWorkerHook', after_iter=N)]``.
"""

import os
import signal
import sys
import time

from mmengine.dist import get_rank
from mmengine.hooks import Hook
from mmpretrain.registry import HOOKS


@HOOKS.register_module()
class StopWorkerHook(Hook):
    """SIGSTOP this process on ``rank`` once ``after_iter`` iterations ran."""

    def __init__(self, after_iter=2, rank=1):
        self.after_iter = after_iter
        self.rank = rank

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        if get_rank() == self.rank and runner.iter + 1 == self.after_iter:
            # Rank 1's logger is silent: say it on stderr, with the time.
            print(
                f'StopWorkerHook: rank {self.rank} stops at {time.time():.3f}',
                file=sys.stderr,
                flush=True,
            )
            os.kill(os.getpid(), signal.SIGSTOP)
