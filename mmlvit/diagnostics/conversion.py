"""Per-block conversion error of a linear student against its softmax
teacher, measured on real batches.

For every block ``i`` the teacher (softmax) and the student (linear or
hybrid) classifier run on the same images and three things are compared:

- ``attn_rel_err``: ||a_s - a_t|| / ||a_t|| of the attention-module outputs
  ``backbone.layers.{i}.attn`` (B, N, C), each model on its own activations
  (what attention-output distillation minimises; upstream errors add up);
- ``attn_rel_err_local``: the same with the student's attention module fed
  the teacher's attention input, so that it measures block ``i``'s operator
  alone (how hard this block is to convert). This only means something when
  the student works in the teacher's token representation (its patch
  embedding and norms copied, e.g. FullCopy); a student whose embedding was
  trained on its own (Random, MLPCopy) gets about 1 everywhere;
- ``block_cos``: the mean over tokens of the cosine similarity of the block
  outputs ``backbone.layers.{i}`` (B, N, C);
- ``map_tv``: for operators that form an N x N map, the mean over rows of
  the total-variation distance 0.5 * sum_j |A_s - A_t| between the student's
  and the teacher's attention maps, each row first divided by the sum of
  its absolute values (:func:`map_total_variation`). Softmax and kernel
  rows are probability rows and stay as they are; signed or unnormalised
  rows (GLA, InLine) are brought to the same scale, so the value always
  lies in [0, 1] (0: the same row up to a positive factor; 1: disjoint
  supports, or opposite signs).

Token sequences are aligned as attention distillation aligns them (patch
tokens only when one side has a class token). The final features (the
head's input, (B, C)) give ``feature_rel_err`` and ``feature_cos``, the
logits the top-1 agreement.
"""

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from mmlvit.models.attentions import BaseAttention
from mmlvit.models.distillers.recorder import AttentionRecording
from mmlvit.models.losses.attention_map_mse import attention_map
from mmlvit.models.losses.distill_base import match_tokens

BLOCK_METRICS = ('attn_rel_err', 'attn_rel_err_local', 'block_cos', 'map_tv')


def map_total_variation(s_map, t_map, eps=1e-12):
    """Total-variation distance of two attention maps, row by row.

    Each row is divided by the sum of its absolute values (an L1-unit
    row; a row of zeros stays zero), then ``0.5 * sum_j |a_s - a_t|``.
    For rows of non-negative weights summing to 1 (softmax, kernel
    attention) this is the usual total-variation distance; for signed or
    unnormalised rows (GLA, InLine) it compares the rows' shapes on the
    same scale. Always in [0, 1].

    Args:
        s_map, t_map (Tensor): (..., N, N) maps, rows over the last dim.

    Returns:
        Tensor: (..., N), one distance per row.
    """

    def unit(rows):
        rows = rows.float()
        return rows / rows.abs().sum(-1, keepdim=True).clamp_min(eps)

    return 0.5 * (unit(s_map) - unit(t_map)).abs().sum(-1)


class ArchitectureMismatch(ValueError):
    """Teacher and student cannot be compared block by block."""


@dataclass
class _Ratio:
    """Running sum of squared differences over squared references."""

    num: float = 0.0
    den: float = 0.0

    def add(self, diff, ref):
        self.num += float(diff.float().pow(2).sum())
        self.den += float(ref.float().pow(2).sum())

    def value(self):
        return math.sqrt(self.num / self.den) if self.den > 0 else math.nan


@dataclass
class _Mean:
    total: float = 0.0
    count: int = 0

    def add(self, values):
        self.total += float(values.float().sum())
        self.count += values.numel()

    def value(self):
        return self.total / self.count if self.count else math.nan


@dataclass
class ConversionDiagnosis:
    """The result of :func:`diagnose_conversion`.

    Attributes:
        blocks (list[dict]): One row per block: ``block``, ``operator`` and
            the :data:`BLOCK_METRICS` (``map_tv`` is NaN where the student's
            operator has no map).
        final (dict): ``feature_rel_err``, ``feature_cos``,
            ``top1_agreement`` and ``images``.
    """

    blocks: list = field(default_factory=list)
    final: dict = field(default_factory=dict)

    def worst_blocks(self, k, metric='attn_rel_err'):
        """The ``k`` blocks with the largest ``metric``, worst first."""
        ranked = sorted(self.blocks, key=lambda row: row[metric], reverse=True)
        return [row['block'] for row in ranked[:k]]


def check_comparable(teacher, student):
    """Raise :class:`ArchitectureMismatch` unless both classifiers have the
    same number of blocks and the same width."""
    t_layers, s_layers = teacher.backbone.layers, student.backbone.layers
    if len(t_layers) != len(s_layers):
        raise ArchitectureMismatch(
            f'The teacher has {len(t_layers)} blocks and the student '
            f'{len(s_layers)}: a block-by-block diagnosis needs the same '
            'depth. Give the teacher checkpoint that the student config was '
            'made for (arch num_layers).'
        )
    t_dims = teacher.backbone.embed_dims
    s_dims = student.backbone.embed_dims
    if t_dims != s_dims:
        raise ArchitectureMismatch(
            f'The teacher is {t_dims} wide and the student {s_dims}: a '
            'block-by-block diagnosis needs the same width (arch '
            'embed_dims).'
        )


def _operator_name(attn):
    return getattr(attn, 'short_name', None) or type(attn).__name__


class _BlockOutputs:
    """Records the output (B, N, C) of every ``backbone.layers.{i}``."""

    def __init__(self, classifier):
        self.layers = list(classifier.backbone.layers)
        self.outputs = {}
        self._handles = []

    def __enter__(self):
        for i, layer in enumerate(self.layers):
            self._handles.append(layer.register_forward_hook(self._hook(i)))
        return self

    def __exit__(self, *exc_info):
        for handle in self._handles:
            handle.remove()

    def _hook(self, i):
        def hook(module, args, output):
            self.outputs[i] = output

        return hook


def _run(classifier, inputs, blocks):
    """One forward pass with everything recorded: (attention recording,
    block outputs, final features (B, C), logits (B, K))."""
    with (
        AttentionRecording(classifier, blocks, ('outputs', 'inputs')) as attn,
        _BlockOutputs(classifier) as block,
    ):
        feats = classifier.extract_feat(inputs)
    logits = classifier.head(feats)
    final = classifier.head.pre_logits(feats)
    return attn, block, final, logits


def _local_input(args, kwargs, student_args, t_extra, s_extra):
    """The teacher's attention input cut to the student's tokens, with the
    student's own remaining arguments (the patch grid); None when the
    student has extra tokens the teacher lacks."""
    x = args[0]
    if s_extra != t_extra:
        if s_extra != 0 or t_extra is None:
            return None
        x = x[:, t_extra:]
    return (x, *student_args[1:])


def _first(args, n):
    """Attention arguments with the tokens (B, N, C) cut to n images."""
    return (args[0][:n], *args[1:])


@torch.no_grad()
def diagnose_conversion(teacher, student, batches, maps=True, map_images=16):
    """Measure the per-block conversion error on some batches.

    Args:
        teacher (nn.Module): The softmax classifier (mmpretrain
            ``ImageClassifier``), weights loaded.
        student (nn.Module): The student classifier, same depth and width.
        batches (Iterable[Tensor]): Preprocessed images (B, C, H, W).
        maps (bool): Compare attention maps where the student's operator
            forms one. Defaults to True.
        map_images (int): Maps are compared on the first ``map_images``
            images of each batch (memory and time O(map_images h N^2) per
            block). Defaults to 16.

    Returns:
        ConversionDiagnosis
    """
    check_comparable(teacher, student)
    teacher.eval()
    student.eval()
    depth = len(student.backbone.layers)
    blocks = list(range(depth))
    attn_err = [_Ratio() for _ in blocks]
    local_err = [_Ratio() for _ in blocks]
    block_cos = [_Mean() for _ in blocks]
    map_tv = [_Mean() for _ in blocks]
    feature_err, feature_cos, agreement = _Ratio(), _Mean(), _Mean()
    t_extra = getattr(teacher.backbone, 'num_extra_tokens', None)
    s_extra = getattr(student.backbone, 'num_extra_tokens', None)

    def aligned(s, t, dim=1):
        return match_tokens(s, t, s_extra, t_extra, dim=dim, owner='Diagnosis')

    images = 0
    for inputs in batches:
        t_attn, t_block, t_final, t_logits = _run(teacher, inputs, blocks)
        s_attn, s_block, s_final, s_logits = _run(student, inputs, blocks)
        images += inputs.shape[0]
        for i in blocks:
            s, t = aligned(s_attn.outputs[i], t_attn.outputs[i])
            attn_err[i].add(s - t, t)
            s_args, s_kwargs = s_attn.inputs[i]
            local = _local_input(*t_attn.inputs[i], s_args, t_extra, s_extra)
            if local is not None:
                s_local = s_attn.modules[i](*local, **s_kwargs)
                s, t = aligned(s_local, t_attn.outputs[i])
                local_err[i].add(s - t, t)
            s, t = aligned(s_block.outputs[i], t_block.outputs[i])
            block_cos[i].add(F.cosine_similarity(s.float(), t.float(), -1))
            module = s_attn.modules[i]
            if maps and (
                not isinstance(module, BaseAttention)
                or module.has_attention_map
            ):
                t_args, t_kwargs = t_attn.inputs[i]
                s_map = attention_map(
                    module, _first(s_args, map_images), s_kwargs
                )
                t_map = attention_map(
                    t_attn.modules[i], _first(t_args, map_images), t_kwargs
                )
                s_map, t_map = aligned(s_map, t_map, dim=2)
                s_map, t_map = aligned(s_map, t_map, dim=3)
                map_tv[i].add(map_total_variation(s_map, t_map))
        feature_err.add(s_final - t_final, t_final)
        feature_cos.add(
            F.cosine_similarity(s_final.float(), t_final.float(), -1)
        )
        agreement.add((s_logits.argmax(-1) == t_logits.argmax(-1)).float())
    if images == 0:
        raise ValueError('diagnose_conversion got no batches.')

    diagnosis = ConversionDiagnosis()
    for i in blocks:
        diagnosis.blocks.append(
            dict(
                block=i,
                operator=_operator_name(student.backbone.layers[i].attn),
                attn_rel_err=attn_err[i].value(),
                attn_rel_err_local=local_err[i].value(),
                block_cos=block_cos[i].value(),
                map_tv=map_tv[i].value(),
            )
        )
    diagnosis.final = dict(
        feature_rel_err=feature_err.value(),
        feature_cos=feature_cos.value(),
        top1_agreement=agreement.value(),
        images=images,
    )
    return diagnosis
