"""Refuse checkpoints that do not fit the runner's model.

mmengine's ``Runner.load_checkpoint`` (``load_from``, ``tools/test.py``,
``--resume``) loads with ``strict=False``: a checkpoint of another
architecture loads "successfully", with a warning per skipped tensor, and
the run trains or evaluates random weights. The runner calls the hooks'
``after_load_checkpoint`` after reading the file and before loading it into
the model, so the check here stops the run before anything is loaded.
"""

import logging
import re
from collections.abc import Mapping

import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.runner.checkpoint import find_latest_checkpoint
from mmpretrain.registry import HOOKS
from torch.nn.parallel import DistributedDataParallel

from mmlvit.engine.checkpoint_fit import (
    CheckpointMismatchError,
    describe,
    mismatches,
    softmax_to_linear_hint,
)
from mmlvit.utils.model import unwrap_model

__all__ = ['CheckpointMismatchError', 'StrictLoadHook']

OPT_IN = 'default_hooks.strict_load.allow_partial=True'


@HOOKS.register_module()
class StrictLoadHook(Hook):
    """Stop ``load_from``, ``tools/test.py`` and ``--resume`` when the
    checkpoint does not fit the model.

    Before the runner loads a checkpoint into its model, the checkpoint's
    state dict is compared with the model's: tensors of another shape, model
    weights absent from the file and tensors of the file the model lacks are
    an error that names the file and the keys. A model that saves and loads
    its own layout (the ``AttentionDistiller`` saves its student alone and
    accepts such files) is compared with what it saves.

    Args:
        allow_partial (bool): Load what matches and warn about the rest
            (e.g. a classifier fine-tuned with a new head), as mmengine does
            by default. Set it with ``--cfg-options
            default_hooks.strict_load.allow_partial=True``. Defaults to
            False.
        revise_keys (list[tuple[str, str]]): The (pattern, replacement)
            pairs the runner applies to the checkpoint's keys before loading
            (``Runner.load_checkpoint``'s default: strip ``module.``).
    """

    priority = 'VERY_HIGH'  # before hooks that load the weights themselves

    def __init__(self, allow_partial=False, revise_keys=((r'^module\.', ''),)):
        self.allow_partial = allow_partial
        self.revise_keys = [tuple(pair) for pair in revise_keys]

    def after_load_checkpoint(self, runner, checkpoint):
        model = unwrap_model(runner.model)
        if model is not runner.model and not isinstance(
            runner.model, DistributedDataParallel
        ):
            return  # FSDP, DeepSpeed, ...: their state dicts are not compared
        state = checkpoint.get('state_dict', checkpoint)
        if not isinstance(state, Mapping):
            return  # mmengine's loader reports it
        found = {}
        for key, value in state.items():
            for pattern, replacement in self.revise_keys:
                key = re.sub(pattern, replacement, key)
            if isinstance(value, torch.Tensor):
                found[key] = tuple(value.shape)
        differences = mismatches(found, model)
        problems = describe(*differences)
        if not problems:
            return
        name = _checkpoint_name(runner)
        hint = softmax_to_linear_hint(model, *differences, name)
        if self.allow_partial:
            print_log(
                f'Loading only the matching tensors of {name} '
                f'({OPT_IN}): {problems}.',
                logger='current',
                level=logging.WARNING,
            )
            return
        raise CheckpointMismatchError(
            f'Checkpoint {name} does not fit the model: {problems}. Loaded '
            'anyway, the run would use a model that is not the one in the '
            'file (unmatched weights keep their initialisation). Use the '
            'config the checkpoint was trained with (architecture, '
            'depth, width, number of classes), or the checkpoint this config '
            f'was trained for. {hint + " " if hint else ""}To load only the '
            'matching tensors on purpose (e.g. fine-tuning with a new head), '
            f'add --cfg-options {OPT_IN}.'
        )


def _checkpoint_name(runner):
    """The file being loaded: ``load_from``/``--resume PATH``/the file
    auto-resume chose, else the newest checkpoint of the work dir."""
    name = getattr(runner, '_load_from', None)
    if name is None and getattr(runner, '_resume', False):
        name = find_latest_checkpoint(runner.work_dir)
    return name or 'the checkpoint'
