"""Copy rules: what happens to a requested student tensor, given its
checkpoint counterpart.

The rules are data: :data:`COPY_RULES` is an ordered list of
:class:`CopyRule`; for every student tensor of a requested component that
the checkpoint holds, the first rule whose ``component`` and ``settings``
(if set) and ``applies`` match decides its records and writes. A tensor no rule
matches is a shape mismatch (an error, raised before anything is
written). A new rule (e.g. for an operator whose extra parameters sit
inside a softmax tensor in another layout) is one :class:`CopyRule`
inserted into the list, before the rule it must take precedence over.

An operator's own rules register themselves with
:func:`register_copy_rule` when their module is imported (the package
imports them): ``extra head qkv rows`` and ``extra head proj columns``,
under the ``TTTFullCopy`` setting only (``ttt_inheritance.py``), come
before the built-in rules: a ``qkv`` with one head's extra rows takes the
softmax rows and, for the extra head, one softmax head's q, k, v rows; a
``proj`` with that head's extra inputs takes the softmax ``proj`` into its
first C columns.

The built-in rules (operator-agnostic, from the attention contract in
``mmlvit/models/attentions/base.py``), in order:

- ``operator-specific proj``: ``attn.proj`` whose input is wider than the
  softmax one (TTT's C + d) is not copied, weight and bias together.
- ``same shape``: copied.
- ``standard qkv rows``: ``attn.qkv`` with extra rows (e.g. TTT's 3C + 3d):
  the standard 3C rows are copied, the extra rows keep their default init.
- ``resized pos_embed``: the rows of extra tokens the student lacks are
  dropped (class token, distillation token), and the patch grid is
  resized (bicubic) when it differs.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
import torch.nn as nn
from mmpretrain.models.utils import resize_pos_embed

from .errors import TransferError
from .report import Record

#: A deferred in-place copy (run only once every tensor is planned).
Write = Callable[[], None]


@dataclass(frozen=True)
class TensorMatch:
    """A requested student tensor and its checkpoint counterpart.

    Attributes:
        key (str): Classifier-space key, e.g.
            ``backbone.layers.0.attn.qkv.weight``.
        component (str): Its component (``components.COMPONENTS``).
        param (Tensor): The student's tensor (written in place).
        src (Tensor): The checkpoint's tensor of the same key.
        params (Mapping[str, Tensor]): Every student parameter by key
            (a rule may look at a sibling, e.g. the weight of a bias).
        state_dict (Mapping[str, Tensor]): The whole checkpoint.
        backbone (nn.Module): The student backbone.
        setting (str): The name of the setting being applied.
    """

    key: str
    component: str
    param: torch.Tensor
    src: torch.Tensor
    params: Mapping[str, torch.Tensor]
    state_dict: Mapping[str, torch.Tensor]
    backbone: nn.Module
    setting: str = ''

    def record(self, action: str, numel: int, reason: str = '') -> Record:
        """A :class:`Record` of this tensor."""
        return Record(self.key, self.component, action, numel, reason)

    def sibling_shapes(self, name: str) -> tuple | None:
        """(student shape, checkpoint shape) of the tensor ``name``
        (e.g. 'weight') of the same module, or None if either lacks it."""
        key = self.key.rsplit('.', 1)[0] + '.' + name
        if key not in self.params or key not in self.state_dict:
            return None
        return self.params[key].shape, self.state_dict[key].shape


@dataclass(frozen=True)
class CopyRule:
    """One copy rule.

    Attributes:
        name (str): What the rule does, for readers and tests.
        applies (Callable[[TensorMatch], bool]): Whether the rule decides
            this tensor.
        plan (Callable[[TensorMatch], tuple[list[Write], list[Record]]]):
            The writes (deferred copies) and the records of the tensor.
        component (str, optional): The rule only sees tensors of this
            component. Defaults to None: any component.
        settings (tuple[str]): The rule only applies under these settings.
            Defaults to (): under every setting.
    """

    name: str
    applies: Callable[[TensorMatch], bool]
    plan: Callable[[TensorMatch], tuple[list[Write], list[Record]]]
    component: str | None = None
    settings: tuple[str, ...] = ()

    def matches(self, tensor: TensorMatch) -> bool:
        """Whether this rule decides ``tensor``."""
        return (
            self.component in (None, tensor.component)
            and (not self.settings or tensor.setting in self.settings)
            and self.applies(tensor)
        )


def copy_into(dst: torch.Tensor, src: torch.Tensor) -> Write:
    """The deferred ``dst.copy_(src)``."""
    return lambda: dst.copy_(src)


def _wider_proj(tensor):
    """The student's ``proj`` maps more than C inputs to the same C."""
    shapes = tensor.sibling_shapes('weight')
    if shapes is None:
        return False
    student, src = shapes
    return student[0] == src[0] and student[1] > src[1]


def _skip_wider_proj(tensor):
    # Weight and bias stay together: the bias fits by shape but belongs to
    # an operator-specific projection.
    reason = 'operator-specific proj: its input is wider than the softmax proj'
    return [], [
        tensor.record('default', tensor.param.numel(), reason),
        tensor.record('skipped', tensor.src.numel(), reason),
    ]


def _same_shape(tensor):
    return tensor.src.shape == tensor.param.shape


def _copy_whole(tensor):
    return [copy_into(tensor.param, tensor.src)], [
        tensor.record('copied', tensor.param.numel())
    ]


def _standard_rows(tensor):
    """The student's ``qkv`` has extra rows after the 3C standard ones and
    the checkpoint's ``qkv`` is the standard C -> 3C one."""
    shapes = tensor.sibling_shapes('weight')
    if shapes is None:
        return False
    student, src = shapes
    return (
        student[1] == src[1]
        and src[0] == 3 * src[1]
        and student[0] > src[0]
        and tensor.src.shape[0] == src[0]
    )


def _copy_standard_rows(tensor):
    rows, total = tensor.src.shape[0], tensor.param.shape[0]
    extra = tensor.param.numel() - tensor.src.numel()
    return [copy_into(tensor.param[:rows], tensor.src)], [
        tensor.record(
            'copied', tensor.src.numel(), f'standard rows 0:{rows} of {total}'
        ),
        tensor.record(
            'default', extra, f'operator-specific extra rows {rows}:{total}'
        ),
    ]


def _same_width(tensor):
    return tensor.src.shape[-1] == tensor.param.shape[-1]


def _copy_resized_pos_embed(tensor):
    resized = adapt_pos_embed(tensor.src, tensor.backbone)
    return [copy_into(tensor.param, resized)], [
        tensor.record(
            'copied',
            tensor.param.numel(),
            f'resized from {tuple(tensor.src.shape)}',
        )
    ]


def adapt_pos_embed(src: torch.Tensor, backbone: nn.Module) -> torch.Tensor:
    """A checkpoint ``pos_embed`` (1, extra + H*W, C) for ``backbone``:
    the extra-token rows (class, then distillation token) the backbone
    lacks dropped from the end of that group, the grid resized to its
    ``patch_resolution``.

    Raises:
        TransferError: The checkpoint grid is not square, or the backbone
            has extra tokens the checkpoint has no positions for.
    """
    # Registers (DINOv2) have no position row.
    extra = getattr(
        backbone, 'num_pos_extra_tokens', backbone.num_extra_tokens
    )
    src_extra = src.shape[1] - int(src.shape[1] ** 0.5) ** 2
    if src_extra not in (0, 1, 2):
        raise TransferError(
            f'Cannot read a square patch grid from the checkpoint pos_embed '
            f'{tuple(src.shape)}.'
        )
    if src_extra < extra:
        token = 'class-token' if src_extra == 0 else 'distillation-token'
        raise TransferError(
            f'The student has {extra} extra tokens (class, distillation) but '
            f'the checkpoint pos_embed {tuple(src.shape)} has no {token} '
            'position.'
        )
    src = torch.cat([src[:, :extra], src[:, src_extra:]], dim=1)
    side = int((src.shape[1] - extra) ** 0.5)
    return resize_pos_embed(
        src,
        (side, side),
        backbone.patch_resolution,
        getattr(backbone, 'interpolate_mode', 'bicubic'),
        extra,
    )


#: The rules in order; the first that matches a tensor decides it.
COPY_RULES: list[CopyRule] = [
    CopyRule(
        'operator-specific proj',
        _wider_proj,
        _skip_wider_proj,
        component='attn_proj',
    ),
    CopyRule('same shape', _same_shape, _copy_whole),
    CopyRule(
        'standard qkv rows',
        _standard_rows,
        _copy_standard_rows,
        component='attn_qkv',
    ),
    CopyRule(
        'resized pos_embed',
        _same_width,
        _copy_resized_pos_embed,
        component='pos_embed',
    ),
]


def register_copy_rule(rule: CopyRule, before: str | None = None) -> None:
    """Add ``rule`` to :data:`COPY_RULES`: just before the rule named
    ``before`` (it then takes precedence over it), else last.

    Raises:
        ValueError: No rule is named ``before``, or one is named like
            ``rule``.
    """
    names = [r.name for r in COPY_RULES]
    if rule.name in names:
        raise ValueError(f'A copy rule is already named {rule.name!r}.')
    if before is None:
        COPY_RULES.append(rule)
    elif before in names:
        COPY_RULES.insert(names.index(before), rule)
    else:
        raise ValueError(
            f'No copy rule named {before!r}; the rules: {", ".join(names)}.'
        )


def rule_for(tensor: TensorMatch) -> CopyRule | None:
    """The first rule of :data:`COPY_RULES` that decides ``tensor``, or
    None (a shape mismatch)."""
    return next((r for r in COPY_RULES if r.matches(tensor)), None)
