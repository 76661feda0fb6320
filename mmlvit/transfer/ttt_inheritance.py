"""Full inheritance into TTT: the ``TTTFullCopy`` setting and its copy
rules, added to the tables of ``settings.py`` and ``copy_rules.py`` when
this module is imported (the package imports it).

T5 (Transformer-to-TTT) inherits everything a softmax ViT block has into
its TTT block: the q, k, v and output projections, the MLP and the norms,
with a fresh inner model. mmlvit's TTT operator
(:class:`mmlvit.models.attentions.TTTAttention`) has one head more than
softmax attention: ``qkv`` has 3C + 3d rows [q1 C | k1 C | v1 C | q2 d |
k2 d | v2 d] (d = C / h) and ``proj`` maps the C + d concatenated head
outputs back to C. FullCopy (the paper's) copies only the 3C standard
rows. ``TTTFullCopy`` copies what FullCopy copies, and besides:

- ``qkv`` rows q2, k2, v2 (weight and bias) of the extra depthwise-conv
  head: the q, k, v rows of softmax head :data:`SOURCE_HEAD`, so the extra
  head starts from the features one softmax head computes;
- ``proj``: the softmax ``proj`` into the input columns 0:C that read the
  SwiGLU heads (the standard heads' outputs, as in softmax attention) and
  its bias; the d columns that read the extra head keep their default
  init (trunc-normal 0.02), a small start for a head softmax attention
  does not have.

Not inherited, because nothing in a softmax block corresponds: the inner
models' weights ``w1``, ``w2`` (1, h, d, d) and ``w3`` (d, 1, 3, 3) are the
starting points of per-image fast weights, fitted to each image's keys and
values by one gradient step; the softmax MLP (C -> 4C -> C, GELU) is a
different function of different inputs and has no d x d per-head block to
take. They keep the operator's default init, as T5's random inner operator.

The rules match by shape (a ``qkv`` with exactly 3d extra rows, a ``proj``
with exactly d extra inputs, d the attention module's ``head_dims``), so
under ``TTTFullCopy`` any other operator is initialised as by FullCopy.
"""

from functools import partial

import torch

from .copy_rules import CopyRule, TensorMatch, Write, register_copy_rule
from .report import Record
from .settings import SETTINGS, Setting, register_setting

#: The name of the setting whose copy rules these are.
SETTING = 'TTTFullCopy'
#: The softmax head whose q, k, v rows the extra head takes.
SOURCE_HEAD = 0


def _copy(dst: torch.Tensor, src: torch.Tensor) -> Write:
    return partial(torch.Tensor.copy_, dst, src)


def _extra_head_dims(tensor: TensorMatch) -> int | None:
    """d of the attention module holding ``tensor`` (``...attn.qkv.*``),
    or None if it states none."""
    path = tensor.key.removeprefix('backbone.').rsplit('.', 2)[0]
    return getattr(tensor.backbone.get_submodule(path), 'head_dims', None)


def has_extra_head_rows(tensor: TensorMatch) -> bool:
    """The student's ``qkv`` is the softmax C -> 3C one plus exactly one
    head's q, k, v rows (3d)."""
    shapes = tensor.sibling_shapes('weight')
    d = _extra_head_dims(tensor)
    if shapes is None or d is None:
        return False
    student, src = shapes
    return (
        student[1] == src[1]
        and src[0] == 3 * src[1]
        and student[0] == src[0] + 3 * d
        and tensor.src.shape[0] == src[0]
    )


def copy_rows_and_extra_head(
    tensor: TensorMatch,
) -> tuple[list[Write], list[Record]]:
    """Rows 0:3C from the softmax ``qkv``; q2, k2, v2 (d rows each) from
    the q, k, v rows of softmax head :data:`SOURCE_HEAD`."""
    C3, total = tensor.src.shape[0], tensor.param.shape[0]
    C, d = C3 // 3, (total - C3) // 3
    writes = [_copy(tensor.param[:C3], tensor.src)]
    sources = []
    for part in range(3):  # q, k, v
        start = part * C + SOURCE_HEAD * d
        writes.append(
            _copy(
                tensor.param[C3 + part * d : C3 + (part + 1) * d],
                tensor.src[start : start + d],
            )
        )
        sources.append(f'{start}:{start + d}')
    reason = (
        f'rows 0:{C3} of {total}; extra head rows {C3}:{total} from softmax '
        f'head {SOURCE_HEAD} (q, k, v rows {", ".join(sources)})'
    )
    return writes, [tensor.record('copied', tensor.param.numel(), reason)]


def has_extra_head_input(tensor: TensorMatch) -> bool:
    """The student's ``proj`` reads the softmax C inputs plus exactly one
    head's d outputs."""
    shapes = tensor.sibling_shapes('weight')
    d = _extra_head_dims(tensor)
    if shapes is None or d is None:
        return False
    student, src = shapes
    return student[0] == src[0] and student[1] == src[1] + d


def copy_proj_columns(
    tensor: TensorMatch,
) -> tuple[list[Write], list[Record]]:
    """The softmax ``proj`` weight into input columns 0:C (the rest keeps
    its init); the bias whole."""
    if tensor.param.shape == tensor.src.shape:  # the bias
        reason = f'with the softmax proj in columns 0:{tensor.src.shape[0]}'
        return [_copy(tensor.param, tensor.src)], [
            tensor.record('copied', tensor.param.numel(), reason)
        ]
    C, total = tensor.src.shape[1], tensor.param.shape[1]
    extra = tensor.param.numel() - tensor.src.numel()
    return [_copy(tensor.param[:, :C], tensor.src)], [
        tensor.record('copied', tensor.src.numel(), f'columns 0:{C}'),
        tensor.record(
            'default', extra, f'extra head columns {C}:{total} (its output)'
        ),
    ]


# FullCopy's components; the rules below take the extra head's share.
register_setting(
    Setting(SETTING, 'tttfullcopy', SETTINGS['FullCopy'].components)
)
register_copy_rule(
    CopyRule(
        'extra head qkv rows',
        has_extra_head_rows,
        copy_rows_and_extra_head,
        component='attn_qkv',
        settings=(SETTING,),
    ),
    before='operator-specific proj',
)
register_copy_rule(
    CopyRule(
        'extra head proj columns',
        has_extra_head_input,
        copy_proj_columns,
        component='attn_proj',
        settings=(SETTING,),
    ),
    before='operator-specific proj',
)
