"""Reading softmax ViT checkpoints into mmpretrain's key space.

Every supported release is a timm-style ViT state dict in some container
(the OpenAI/OpenCLIP CLIP layout is renamed to it first, see
:mod:`.openai_clip`), or already an mmpretrain classifier checkpoint.
:func:`load_softmax_checkpoint` finds the weights in the container
(``format``), reads the ViT family off the keys (:mod:`.vit_families`),
renames timm keys to the names of mmpretrain's
``ImageClassifier(VisionTransformer)`` (:mod:`.timm_keys`, which lists the
target keys) and drops what only pre-training used (MAE decoder, DINO/iBOT
heads, MoCo projector and momentum encoder, CLIP's text tower). Keys it
cannot place are an error, not a silent drop: a model that loads "fine"
without its layer scales computes something else.
"""

from collections import Counter, OrderedDict
from collections.abc import Mapping

import torch
from mmengine.logging import print_log

from mmlvit.checkpoint import CheckpointError, load_checkpoint_file

from .errors import preview_keys
from .openai_clip import looks_openai_clip, openai_clip_to_timm
from .shipped import shipped_path
from .timm_keys import PRETRAINING_ONLY, convert_timm
from .trained_config import trained_backbone_settings
from .vit_families import FAMILIES, identify_family

FORMATS = (
    'auto',
    'mmpretrain',
    'timm',
    'deit',
    'mae',
    'dino',
    'mocov3',
    'ibot',
    'deit3',
    'deit-distilled',
    'clip',
    'openai-clip',
    'eva02',
    'dinov2',
    'dinov3',
    'siglip',
)

_MMPRETRAIN_MARKERS = ('patch_embed.projection.', 'layers.0.')


def load_softmax_checkpoint(
    src: str | Mapping, format: str = 'auto', img_size: int | None = None
) -> 'OrderedDict[str, torch.Tensor]':
    """Read a softmax ViT checkpoint as an mmpretrain classifier state dict.

    Args:
        src (str | Mapping): A checkpoint file (``.pth``/``.pt``/``.bin``,
            read with ``weights_only`` and mmlvit's allow-list, or
            ``.safetensors``; a relative path missing from the working
            directory is looked up among the files mmlvit ships, see
            :func:`~.shipped.shipped_path`) or an already loaded checkpoint
            object.
        format (str): One of ``FORMATS``. ``'auto'`` (default) detects the
            layout: ``'mmpretrain'`` (``backbone.*``/``head.*``, optionally
            under ``'state_dict'``), ``'timm'`` (a flat timm ViT/DeiT state
            dict, also DINO's and iBOT's released backbones), ``'deit'`` (the
            official DeiT release, under ``'model'``), ``'mae'`` (under
            ``'model'``, no head, maybe ``fc_norm`` or the decoder),
            ``'dino'`` (``'teacher'``/``'student'`` with ``backbone.`` or
            ``module.backbone.`` prefixes; the teacher is used), ``'mocov3'``
            (``module.base_encoder.`` under ``'state_dict'``), ``'ibot'``
            (like DINO, or flat under ``'state_dict'``, with
            ``masked_embed``); ``'openai-clip'`` (OpenAI/OpenCLIP:
            ``visual.conv1.weight``, ``visual.transformer.resblocks.*``;
            the image tower is read, the text tower dropped); the families
            in timm's layout (flat, or under ``'state_dict'``/``'model'``;
            their keys: :data:`~.vit_families.FAMILIES`): ``'deit3'``,
            ``'deit-distilled'``, ``'clip'``, ``'eva02'``, ``'dinov2'``,
            ``'dinov3'``, ``'siglip'``. Under ``'auto'`` a flat timm file
            is read as its family.
        img_size (int, optional): The model's image side; a DINOv2 table
            for another size is resampled to it with timm's helper.

    Returns:
        OrderedDict[str, Tensor]: ``backbone.*`` and, when the file has a
        classifier, ``head.layers.head.*``.

    Raises:
        CheckpointError: The file cannot be read, or its layout is unknown
            or does not match ``format``; the message names the file and the
            keys it saw.
    """
    if format not in FORMATS:
        raise ValueError(
            f'Unknown checkpoint format {format!r}; choose from {FORMATS}.'
        )
    if isinstance(src, Mapping):
        name, ckpt = '<in-memory state dict>', src
    else:
        src = shipped_path(str(src))
        name, ckpt = src, load_checkpoint_file(src)
        if not isinstance(ckpt, Mapping):
            raise CheckpointError(
                f'{name} holds a {type(ckpt).__name__}, not a state dict.'
            )
    if format == 'auto':
        format = _detect_format(ckpt, name)
    weights = _LOCATORS[format](ckpt, name)
    family, dropped = None, []
    if format == 'openai-clip':
        weights, dropped = openai_clip_to_timm(weights, name)
    if format == 'mmpretrain':
        state_dict, dropped = _select_mmpretrain(weights)
        state_dict.trained = trained_backbone_settings(ckpt, name)
    else:
        as_format = 'clip' if format == 'openai-clip' else format
        state_dict, pretraining, family = convert_timm(
            weights, name, as_format, img_size
        )
        dropped += pretraining
    _log_dropped(name, format, dropped, family)
    return state_dict


def _detect_format(ckpt, name):
    if _is_tensor_dict(ckpt.get('teacher')) or _is_tensor_dict(
        ckpt.get('student')
    ):
        inner = _dino_backbone(ckpt, name)
        return 'ibot' if 'masked_embed' in inner else 'dino'
    if _is_tensor_dict(ckpt.get('state_dict')):
        keys = ckpt['state_dict'].keys()
        if any(k.startswith('module.base_encoder.') for k in keys):
            return 'mocov3'
        if _looks_mmpretrain(keys):
            return 'mmpretrain'
        if _looks_timm(keys):
            if 'masked_embed' in keys:
                return 'ibot'
            return _timm_family(ckpt['state_dict'], name)
    if _is_tensor_dict(ckpt.get('model')) and _looks_timm(ckpt['model']):
        keys = ckpt['model'].keys()
        pretraining = any(PRETRAINING_ONLY.match(k) for k in keys)
        pooled = 'fc_norm.weight' in keys
        if pretraining or pooled or 'head.weight' not in keys:
            return 'mae'
        return 'deit'
    if _looks_mmpretrain(ckpt.keys()):
        return 'mmpretrain'
    if _looks_timm(ckpt.keys()):
        return 'ibot' if 'masked_embed' in ckpt else _timm_family(ckpt, name)
    if looks_openai_clip(ckpt.keys()) or (
        _is_tensor_dict(ckpt.get('state_dict'))
        and looks_openai_clip(ckpt['state_dict'].keys())
    ):
        return 'openai-clip'
    raise CheckpointError(
        f'Cannot tell the layout of {name}: it is none of '
        f'{FORMATS[1:]}. Top-level keys: {preview_keys(ckpt.keys(), 12)}'
        f'{_nested_preview(ckpt)}. Pass format=... if it is one of them.'
    )


def _locate_mmpretrain(ckpt, name):
    weights = ckpt.get('state_dict', ckpt)
    if not (_is_tensor_dict(weights) and _looks_mmpretrain(weights.keys())):
        raise _layout_error(
            name,
            'mmpretrain',
            'backbone.patch_embed.projection.* / backbone.layers.*',
            ckpt,
        )
    if not any(k.startswith('backbone.') for k in weights):
        weights = {f'backbone.{k}': v for k, v in weights.items()}
    return weights


def _locate_flat(ckpt, name, format, container=None):
    """timm keys at the top level, or under ``container`` when given."""
    weights = ckpt.get(container) if container else ckpt
    if container and not _is_tensor_dict(weights):
        weights = ckpt  # e.g. a backbone re-saved without its container
    if not (_is_tensor_dict(weights) and _looks_timm(weights.keys())):
        where = f"under '{container}'" if container else 'at the top level'
        raise _layout_error(
            name, format, f'timm keys (blocks.*) {where}', ckpt
        )
    return weights


def _locate_timm(ckpt, name):
    if 'state_dict' in ckpt and not _looks_timm(ckpt.keys()):
        return _locate_flat(ckpt, name, 'timm', 'state_dict')
    return _locate_flat(ckpt, name, 'timm')


def _timm_family(weights, name):
    """'timm', or the family a flat timm file holds ('deit3', ...)."""
    return identify_family(weights, name, 'auto')


def _locate_openai_clip(ckpt, name):
    weights = ckpt
    if not looks_openai_clip(ckpt.keys()):
        weights = ckpt.get('state_dict')
    if not (_is_tensor_dict(weights) and looks_openai_clip(weights.keys())):
        raise _layout_error(
            name,
            'openai-clip',
            "'visual.conv1.weight' and 'visual.transformer.resblocks.*' at "
            "the top level or under 'state_dict'",
            ckpt,
        )
    return weights


def _locate_family(format):
    """A timm-layout family: flat, under 'state_dict' or under 'model'."""

    def locate(ckpt, name):
        for container in ('state_dict', 'model'):
            inner = ckpt.get(container)
            if _is_tensor_dict(inner) and _looks_timm(inner.keys()):
                return inner
        return _locate_flat(ckpt, name, format)

    return locate


def _locate_dino(ckpt, name):
    if 'teacher' in ckpt or 'student' in ckpt:
        return _dino_backbone(ckpt, name)
    return _locate_flat(ckpt, name, 'dino')


def _locate_ibot(ckpt, name):
    if 'teacher' in ckpt or 'student' in ckpt:
        return _dino_backbone(ckpt, name)
    return _locate_flat(ckpt, name, 'ibot', 'state_dict')


def _locate_mocov3(ckpt, name):
    weights = ckpt.get('state_dict', ckpt)
    prefix = 'module.base_encoder.'
    backbone = {
        k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)
    }
    if not _looks_timm(backbone):
        raise _layout_error(
            name, 'mocov3', f"'{prefix}blocks.*' under 'state_dict'", ckpt
        )
    return backbone


def _dino_backbone(ckpt, name):
    """The teacher's backbone (DINO and iBOT release the teacher), else the
    student's; ``module.`` (DDP) and ``backbone.`` (multi-crop wrapper)
    prefixes removed."""
    network = ckpt.get('teacher') or ckpt.get('student')
    backbone = {}
    for key, value in network.items():
        key = key.removeprefix('module.')
        if key.startswith('backbone.'):
            backbone[key[len('backbone.') :]] = value
    if not _looks_timm(backbone):
        raise _layout_error(
            name,
            'dino/ibot',
            "'backbone.blocks.*' under 'teacher'/'student'",
            network,
        )
    return backbone


_LOCATORS = {
    'mmpretrain': _locate_mmpretrain,
    'timm': _locate_timm,
    'deit': lambda ckpt, name: _locate_flat(ckpt, name, 'deit', 'model'),
    'mae': lambda ckpt, name: _locate_flat(ckpt, name, 'mae', 'model'),
    'dino': _locate_dino,
    'mocov3': _locate_mocov3,
    'ibot': _locate_ibot,
    'deit3': _locate_family('deit3'),
    'deit-distilled': _locate_family('deit-distilled'),
    'clip': _locate_family('clip'),
    'eva02': _locate_family('eva02'),
    'dinov2': _locate_family('dinov2'),
    'dinov3': _locate_family('dinov3'),
    'openai-clip': _locate_openai_clip,
    'siglip': _locate_family('siglip'),
}


def _select_mmpretrain(weights):
    state_dict = OrderedDict(
        (k, v)
        for k, v in weights.items()
        if k.startswith(('backbone.', 'neck.', 'head.'))
    )
    dropped = [k for k in weights if k not in state_dict]
    return state_dict, dropped


def _log_dropped(name, format, dropped, family=None):
    summary = ''
    if dropped:
        groups = Counter(key.split('.')[0] for key in dropped)
        summary = '; dropped what the classifier does not use: ' + ', '.join(
            f'{group} ({n} tensors)' for group, n in groups.items()
        )
    if family and FAMILIES[family].rule:
        summary += f'; {FAMILIES[family].title}: {FAMILIES[family].rule}'
    print_log(
        f'Read {name} as a {format!r} checkpoint{summary}.', logger='current'
    )


def _is_tensor_dict(obj):
    return (
        isinstance(obj, Mapping)
        and len(obj) > 0
        and all(isinstance(v, torch.Tensor) for v in obj.values())
    )


def _looks_timm(keys):
    return any(k.startswith('blocks.') for k in keys) and any(
        k.startswith('patch_embed.proj.') for k in keys
    )


def _looks_mmpretrain(keys):
    keys = [k.removeprefix('backbone.') for k in keys]
    return all(any(k.startswith(m) for k in keys) for m in _MMPRETRAIN_MARKERS)


def _nested_preview(ckpt):
    nested = [(k, v) for k, v in ckpt.items() if isinstance(v, Mapping)]
    return ''.join(
        f"; under '{k}': {preview_keys(v.keys(), 6)}" for k, v in nested[:3]
    )


def _layout_error(name, format, expected, ckpt):
    return CheckpointError(
        f'{name} is not a {format!r} checkpoint: expected {expected}. Keys '
        f'seen: {preview_keys(ckpt.keys(), 12)}{_nested_preview(ckpt)}.'
    )
