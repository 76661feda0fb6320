from .fsdp import FlexibleRunner
from .loops import ResumableEpochBasedTrainLoop
from .runner import Runner, build_runner

__all__ = [
    'FlexibleRunner',
    'ResumableEpochBasedTrainLoop',
    'Runner',
    'build_runner',
]
