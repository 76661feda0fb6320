"""Copy policies: which softmax weights a linear student starts from.

A policy is a setting (``settings.py``: the components it copies and its
analytical init, if any) or an explicit list of components, applied to one
student by name and shape.

Copy rules: a requested student tensor the checkpoint holds is decided by
the first matching rule of ``copy_rules.COPY_RULES`` (same shape: copied;
standard ``qkv`` rows of a wider ``qkv``; operator-specific ``proj``;
resized ``pos_embed``; see there). Besides:

- A student without a ``cls_token`` or without a learned ``pos_embed``
  (fixed sin-cos) skips those keys. Student parameters the checkpoint lacks
  (gates, convs, inner weights, deeper layers) keep their default init.
- Any other shape mismatch in a requested component is an error, raised
  before anything is written; so is a requested component the checkpoint
  has no keys for.
- ``copy_softmax_attention=True`` (hybrid students): the blocks whose
  operator is softmax attention also copy ``attn.qkv`` and ``attn.proj``,
  whatever the setting; their attention is the teacher's.
"""

import re
from collections.abc import Mapping, Sequence

import torch
import torch.nn as nn

from .components import COMPONENTS, component_of
from .copy_rules import TensorMatch, rule_for
from .errors import TransferError, preview_keys
from .report import CopyReport, Record
from .settings import Policy, get_setting


def resolve_policy(
    setting: str = 'MLPCopy', components: Sequence[str] | None = None
) -> 'Policy':
    """Check a setting and an optional component list.

    Args:
        setting (str): A setting's name or alias (``SETTINGS``).
        components (Sequence[str], optional): Components to copy instead of
            the setting's own list; an analytical setting (Mimetic, Impulse)
            still runs first and may not be combined with the components it
            writes.

    Returns:
        Policy
    """
    setting = get_setting(setting)
    if components is None:
        return Policy(setting, setting.components)
    if isinstance(components, str):
        raise TransferError(
            'components must be a list of names, got the '
            f'string {components!r}.'
        )
    unknown = [c for c in components if c not in COMPONENTS]
    if unknown:
        raise TransferError(
            f'Unknown components {unknown}; choose from {list(COMPONENTS)}.'
        )
    written = set(setting.analytical_components)
    if written & set(components):
        raise TransferError(
            f'{setting.name} initialises {sorted(written)} analytically; do '
            f'not also copy {sorted(written & set(components))}.'
        )
    return Policy(setting, tuple(dict.fromkeys(components)))


def apply_init(
    model: nn.Module,
    state_dict: Mapping[str, torch.Tensor],
    setting: str = 'MLPCopy',
    components: Sequence[str] | None = None,
    copy_softmax_attention: bool = False,
) -> CopyReport:
    """Initialise a student from a softmax checkpoint, in place.

    Args:
        model (nn.Module): The student backbone (a ``VisionTransformer`` or
            ``LinearVisionTransformer``), or its classifier (anything with a
            ``backbone`` attribute; needed for the ``head`` component).
        state_dict (Mapping[str, Tensor]): Weights in mmpretrain classifier
            key space (:func:`load_softmax_checkpoint`).
        setting (str): A setting's name or alias. Defaults to 'MLPCopy'.
        components (Sequence[str], optional): See :func:`resolve_policy`.
        copy_softmax_attention (bool): Also copy ``attn_qkv``/``attn_proj``
            into the blocks whose operator is softmax attention (a hybrid
            student's softmax blocks). Defaults to False.

    Returns:
        CopyReport

    Raises:
        TransferError: Shapes of a requested component do not match, the
            checkpoint lacks a requested component, or the analytical init
            does not apply to this operator. Nothing is written then.
    """
    policy, backbone, writes, records = _prepare(
        model, state_dict, setting, components, copy_softmax_attention
    )
    if policy.analytical is not None:
        written = policy.analytical(backbone)
        records = _mark_analytical(records, written)
    with torch.no_grad():
        for write in writes:
            write()
    return _report(policy, records, state_dict)


def plan_init(
    model: nn.Module,
    state_dict: Mapping[str, torch.Tensor],
    setting: str = 'MLPCopy',
    components: Sequence[str] | None = None,
    copy_softmax_attention: bool = False,
) -> CopyReport:
    """The :class:`CopyReport` that :func:`apply_init` with the same
    arguments would give, without writing anything (tensors an analytical
    setting would write are reported at their default init).

    Returns:
        CopyReport
    """
    policy, _, _, records = _prepare(
        model, state_dict, setting, components, copy_softmax_attention
    )
    return _report(policy, records, state_dict)


def _prepare(model, state_dict, setting, components, copy_softmax_attention):
    """(policy, backbone, writes, records) of an init, nothing written."""
    policy = resolve_policy(setting, components)
    backbone = getattr(model, 'backbone', model)
    if 'head' in policy.components and backbone is model:
        raise TransferError(
            'The head component needs the classifier: pass '
            'the model, not its backbone.'
        )
    prefix = 'backbone.' if backbone is model else ''
    params = {prefix + n: p for n, p in model.named_parameters()}
    softmax_blocks = (
        _softmax_blocks(backbone) if copy_softmax_attention else ()
    )
    writes, records = _plan(
        params, backbone, state_dict, policy, softmax_blocks
    )
    return policy, backbone, writes, records


def _report(policy, records, state_dict):
    used = {r.key for r in records if r.action in ('copied', 'skipped')}
    unused = [k for k in state_dict if k not in used]
    return CopyReport(policy, records, unused)


def _softmax_blocks(backbone):
    """Indices of the blocks whose attention is softmax attention (an
    operator with ``linear_cost = False``)."""
    return tuple(
        i
        for i, layer in enumerate(getattr(backbone, 'layers', ()))
        if getattr(layer.attn, 'linear_cost', True) is False
    )


_BLOCK_ATTENTION = re.compile(r'backbone\.layers\.(\d+)\.attn\.')


def _plan(params, backbone, state_dict, policy, softmax_blocks=()):
    """Decide every tensor's fate without writing; return the writes (to
    run) and the records. A requested tensor the checkpoint holds is
    decided by the first matching rule of ``COPY_RULES``. The attention
    tensors of ``softmax_blocks`` are wanted whatever the policy."""
    writes, records, mismatched = [], [], []
    wanted = set(policy.components)
    for key, param in params.items():
        component = component_of(key)
        block = _BLOCK_ATTENTION.match(key)
        softmax_block = (
            block is not None
            and int(block.group(1)) in softmax_blocks
            and component in ('attn_qkv', 'attn_proj')
        )
        requested = component in wanted or softmax_block
        if not requested or key not in state_dict:
            reason = 'not in checkpoint' if requested else ''
            records.append(
                Record(key, component, 'default', param.numel(), reason)
            )
            continue
        tensor = TensorMatch(
            key,
            component,
            param,
            state_dict[key],
            params,
            state_dict,
            backbone,
            policy.setting.name,
        )
        rule = rule_for(tensor)
        if rule is None:
            mismatched.append(
                f'{key}: checkpoint {tuple(tensor.src.shape)} vs '
                f'student {tuple(param.shape)}'
            )
            continue
        rule_writes, rule_records = rule.plan(tensor)
        writes += rule_writes
        records += rule_records
    if mismatched:
        raise TransferError(
            f'Setting {policy.setting.name}: {len(mismatched)} tensors of the '
            'requested components do not match the student in shape (is '
            'the checkpoint of another architecture?). First ones: '
            + '; '.join(mismatched[:5])
        )
    _check_components_found(params, state_dict, wanted)
    records += _skipped_without_student_param(
        params, backbone, state_dict, wanted
    )
    return writes, records


def _mark_analytical(records, written):
    """Replace the records of analytically written tensors."""
    written = {f'backbone.{name}': numel for name, numel in written}
    records = [r for r in records if r.key not in written]
    records += [
        Record(key, component_of(key), 'analytical', numel)
        for key, numel in written.items()
    ]
    return records


def _skipped_without_student_param(params, backbone, state_dict, wanted):
    """Records for requested checkpoint tensors the student deliberately
    lacks (``cls_token``/``dist_token``/``reg_token``/``pos_embed`` set to
    None)."""
    reasons = {
        'backbone.cls_token': 'the student has no class token',
        'backbone.dist_token': 'the student has no distillation token '
        '(with_dist_token=False): dropped',
        'backbone.reg_token': 'the student has no register tokens '
        '(num_register_tokens=0): dropped',
        'backbone.pos_embed': 'the student has no learned position embedding'
        ' (fixed sin-cos)',
    }
    records = []
    for key, reason in reasons.items():
        component = component_of(key)
        if (
            component in wanted
            and key in state_dict
            and key not in params
            and getattr(backbone, key.split('.')[1], 0) is None
        ):
            records.append(
                Record(
                    key, component, 'skipped', state_dict[key].numel(), reason
                )
            )
    return records


def _check_components_found(params, state_dict, wanted):
    student = {component_of(k) for k in params}
    checkpoint = {component_of(k) for k in state_dict}
    missing = sorted(c for c in wanted if c in student and c not in checkpoint)
    if missing:
        raise TransferError(
            f'The checkpoint has no tensors for the requested components '
            f'{missing} (checkpoint keys: {preview_keys(state_dict)}).'
        )
