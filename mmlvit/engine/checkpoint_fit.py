"""Whether a checkpoint's tensors fit a model: tensors of another shape,
model weights absent from the file and file tensors the model lacks, with
the phrases the errors of :class:`~mmlvit.engine.hooks.StrictLoadHook` and
of ``init_cfg=dict(type='Pretrained')`` are made of."""

import re

from mmlvit.checkpoint import CheckpointError, first_few, shape_text

# Not learned, or restored by their module when absent: never a mismatch.
_IGNORED = re.compile(r'(^|\.)(data_preprocessor\..*|num_batches_tracked)$')


class CheckpointMismatchError(CheckpointError):
    """A checkpoint's tensors do not fit the model it is loaded into."""


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
