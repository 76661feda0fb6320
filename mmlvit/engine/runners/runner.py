"""The Runner that ``tools/train.py`` and ``tools/test.py`` build."""

import copy
import logging
import re

import torch
from mmengine.registry import RUNNERS
from mmengine.runner import Runner as _Runner

from .loops import ResumableEpochBasedTrainLoop

_GPU_NUMBER = re.compile(r'^(\s*)GPU number: (\d+)$', re.MULTILINE)


class _ProcessesNotGPUs(logging.Filter):
    """Rewrite the environment block's 'GPU number: N' as
    'Processes: N (CPU, no CUDA GPU)'."""

    def filter(self, record):
        message = record.getMessage()
        if 'GPU number' in message:
            record.msg = _GPU_NUMBER.sub(
                r'\1Processes: \2 (CPU, no CUDA GPU)', message
            )
            record.args = ()
        return True


class Runner(_Runner):
    """mmengine's Runner whose environment block counts processes, not
    GPUs, on a machine without CUDA, and whose epoch-based training loop
    resumes within an epoch (:mod:`mmlvit.engine.runners.loops`).
    ``tools/train.py`` and ``tools/test.py`` build it."""

    def build_train_loop(self, loop):
        if (
            isinstance(loop, dict)
            and 'type' not in loop
            and loop.get('by_epoch')
        ):
            loop = copy.deepcopy(loop)
            loop.pop('by_epoch')
            return ResumableEpochBasedTrainLoop(
                **loop, runner=self, dataloader=self._train_dataloader
            )
        return super().build_train_loop(loop)

    def _log_env(self, env_cfg):
        if torch.cuda.is_available():
            return super()._log_env(env_cfg)
        rename = _ProcessesNotGPUs()
        self.logger.addFilter(rename)
        try:
            return super()._log_env(env_cfg)
        finally:
            self.logger.removeFilter(rename)


def build_runner(cfg):
    """The runner ``cfg`` asks for: ``runner_type`` when set (e.g.
    mmengine's ``FlexibleRunner`` for FSDP), else :class:`Runner`."""
    if 'runner_type' in cfg:
        return RUNNERS.build(cfg)
    return Runner.from_cfg(cfg)
