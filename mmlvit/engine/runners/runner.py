"""The Runner that ``tools/train.py`` and ``tools/test.py`` build."""

import copy
import logging
import platform
import re

import mmengine
import torch
from mmengine.registry import RUNNERS
from mmengine.runner import Runner as _Runner

from mmlvit.utils.logs import keep_details_in_file

from ..hooks.lr_schedule_check import LearningRateScheduleCheckHook
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
    GPUs, on a machine without CUDA, whose console leaves the full config,
    the hook table and the per-parameter optimizer options to the log file
    (:func:`mmlvit.utils.logs.keep_details_in_file`), which warns before
    training when the learning-rate schedule cannot work at the run's length
    (:mod:`mmlvit.engine.hooks.lr_schedule_check`), and whose epoch-based
    training loop resumes within an epoch
    (:mod:`mmlvit.engine.runners.loops`). ``tools/train.py`` and
    ``tools/test.py`` build it."""

    def register_hooks(self, default_hooks=None, custom_hooks=None):
        super().register_hooks(default_hooks, custom_hooks)
        self.register_hook(LearningRateScheduleCheckHook())

    def build_logger(self, *args, **kwargs):
        logger = super().build_logger(*args, **kwargs)
        keep_details_in_file(logger)
        return logger

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
            super()._log_env(env_cfg)
            devices = f'GPU number: {self.world_size}'
        else:
            rename = _ProcessesNotGPUs()
            self.logger.addFilter(rename)
            try:
                super()._log_env(env_cfg)
            finally:
                self.logger.removeFilter(rename)
            devices = f'Processes: {self.world_size} (CPU, no CUDA GPU)'
        # The block above goes to the log file only (FILE_ONLY).
        self.logger.info(
            f'Environment: Python {platform.python_version()}, PyTorch '
            f'{torch.__version__}, MMEngine {mmengine.__version__}, '
            f'Distributed launcher: {self.launcher}, Distributed '
            f'training: {self.distributed}, {devices}, seed '
            f'{self.seed} (the full environment, config '
            'and hook order are in the log file of the work dir)'
        )


def build_runner(cfg):
    """The runner ``cfg`` asks for: ``runner_type`` when set (e.g.
    mmengine's ``FlexibleRunner`` for FSDP), else :class:`Runner`."""
    if 'runner_type' in cfg:
        return RUNNERS.build(cfg)
    return Runner.from_cfg(cfg)
