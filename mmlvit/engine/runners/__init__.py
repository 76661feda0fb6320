"""The Runner that the tools build, its training loop, and mmengine's FSDP
and distributed set-up made to work here."""

from .fsdp import FlexibleRunner
from .loops import ResumableEpochBasedTrainLoop
from .runner import Runner, build_runner

__all__ = [
    'FlexibleRunner',
    'ResumableEpochBasedTrainLoop',
    'Runner',
    'build_runner',
]
