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

from mmlvit.checkpoint import CheckpointError, first_few, shape_text
from mmlvit.utils.model import unwrap_model

OPT_IN = 'default_hooks.strict_load.allow_partial=True'
# Not learned, or restored by their module when absent: never a mismatch.
_IGNORED = re.compile(r'(^|\.)(data_preprocessor\..*|num_batches_tracked)$')


class CheckpointMismatchError(CheckpointError):
    """A checkpoint's tensors do not fit the model it is loaded into."""


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


def mismatches(found, model):
    """How a checkpoint's tensors differ from a model's.

    Args:
        found (dict[str, tuple]): The checkpoint's keys and shapes.
        model (nn.Module): The model it is loaded into.

    Returns:
        tuple[list[str], list[str], list[str]]: Tensors of another shape
        (``'key (file AxB, model CxD)'``), model weights absent from the
        checkpoint and checkpoint tensors the model lacks.
    """
    # What the model saves (its state_dict hooks applied) and what its
    # parameters and buffers are called: a checkpoint may hold either.
    saved = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    layouts = [saved, _parameter_shapes(model)]
    expected = max(layouts, key=lambda layout: len(layout.keys() & found))
    shapes = [
        f'{k} (file {shape_text(found[k])}, model {shape_text(expected[k])})'
        for k in expected
        if k in found
        and found[k] != expected[k]
        and not _resized_on_load(k, found[k], expected[k])
    ]
    missing = [
        k for k in expected if k not in found and not _IGNORED.search(k)
    ]
    extra = [k for k in found if k not in expected and not _IGNORED.search(k)]
    return shapes, missing, extra


def describe(shapes, missing, extra):
    """:func:`mismatches`' lists as one phrase, with counts and a few keys
    each; empty when all three are."""
    parts = []
    if shapes:
        parts.append(
            f'{len(shapes)} tensors have another shape: {first_few(shapes)}'
        )
    if missing:
        parts.append(
            f'{len(missing)} model weights are not in the file: '
            f'{first_few(missing)}'
        )
    if extra:
        parts.append(
            f'{len(extra)} tensors of the file are not in the model: '
            f'{first_few(extra)}'
        )
    return '; '.join(parts)


def softmax_to_linear_hint(model, shapes, missing, extra, filename):
    """The way to initialise a linear-attention student from a softmax
    checkpoint, when that is what loading ``filename`` into ``model``
    looks like: the model has a :class:`LinearVisionTransformer` and every
    difference lies in the attention modules. Empty otherwise."""
    from mmlvit.models.backbones.linear_vit import LinearVisionTransformer

    names = [text.split(' ')[0] for text in shapes] + missing + extra
    linear = any(
        isinstance(module, LinearVisionTransformer)
        for module in model.modules()
    )
    if not (linear and missing and all('.attn.' in k for k in names)):
        return ''
    return (
        'The file looks like a softmax ViT checkpoint and the model is a '
        'linear-attention student: copy the softmax weights into the '
        "student with custom_hooks=[dict(type='SoftmaxToLinearInitHook', "
        f"checkpoint='{filename}', setting='MLPCopy')] in the config, or "
        f'offline with python tools/init_student.py CONFIG {filename} '
        '--out student.pth and then load_from=student.pth.'
    )


def _resized_on_load(key, found, expected):
    """Whether a shape difference is a learned position-embedding table of
    another patch grid (1, N, C) with the model's width: mmpretrain's ViTs
    (and LinearVisionTransformer) resize it while loading, e.g. a 224-px
    checkpoint fine-tuned or tested at 512 px."""
    return (
        key.endswith('pos_embed')
        and len(found) == len(expected) == 3
        and found[0] == expected[0]
        and found[-1] == expected[-1]
    )


def _parameter_shapes(model):
    """Parameters and persistent buffers by their module path."""
    shapes = {}
    for path, module in model.named_modules(remove_duplicate=False):
        prefix = f'{path}.' if path else ''
        for name, tensor in module._parameters.items():
            if tensor is not None:
                shapes[prefix + name] = tuple(tensor.shape)
        for name, tensor in module._buffers.items():
            if (
                tensor is not None
                and name not in module._non_persistent_buffers_set
            ):
                shapes[prefix + name] = tuple(tensor.shape)
    return shapes


def _checkpoint_name(runner):
    """The file being loaded: ``load_from``/``--resume PATH``/the file
    auto-resume chose, else the newest checkpoint of the work dir."""
    name = getattr(runner, '_load_from', None)
    if name is None and getattr(runner, '_resume', False):
        name = find_latest_checkpoint(runner.work_dir)
    return name or 'the checkpoint'
