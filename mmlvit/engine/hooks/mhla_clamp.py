"""A hook kept so that configs written for earlier releases still run."""

import logging
from typing import TYPE_CHECKING

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmpretrain.registry import HOOKS

if TYPE_CHECKING:
    from mmengine.runner import Runner


@HOOKS.register_module()
class MHLAMixingClampHook(Hook):
    """No longer needed: :class:`~mmlvit.models.attentions.MHLAttention`
    keeps its mixing matrix in [0, 1] by itself (see its
    ``mixing_weights``). Listing this hook does nothing but log a warning
    that says to remove it from ``custom_hooks``."""

    def before_run(self, runner: 'Runner') -> None:
        print_log(
            'MHLAMixingClampHook does nothing: MHLAttention keeps its '
            'mixing matrix in [0, 1] by itself. Remove '
            "dict(type='MHLAMixingClampHook') from custom_hooks.",
            logger='current',
            level=logging.WARNING,
        )
