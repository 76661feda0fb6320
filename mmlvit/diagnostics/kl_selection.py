"""Hybrid blocks chosen by output divergence (greedy, KL of the logits).

A hybrid student keeps softmax attention in K blocks. Instead of ranking
blocks by their own conversion error, :func:`greedy_kl_blocks` asks what
the whole network's output loses: starting from the all-linear student, it
adds one softmax block at a time, each time the block whose softmax
attention (the teacher's weights, as the hybrid config's init hook copies
them) brings the student's logits closest to the teacher's, measured by the
mean KL(teacher || hybrid) of the class distributions on training batches
(the greedy criterion of the hybrid-distillation work, "GA-S2").
"""

import contextlib
from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS
from torch import Tensor, nn


def logit_kl(teacher_log_probs: Tensor, student_logits: Tensor) -> float:
    """Mean over images of KL(teacher || student) of the class
    distributions: teacher log-probabilities and student logits (B, K)."""
    log_q = F.log_softmax(student_logits.float(), dim=-1)
    p = teacher_log_probs.exp()
    return (p * (teacher_log_probs - log_q)).sum(-1).mean().item()


def softmax_block(student_attn: nn.Module, teacher_attn: nn.Module):
    """A ``SoftmaxAttention`` for one student block: the student module's
    shape, the teacher block's ``qkv`` and ``proj`` weights, the student
    block's layer scale (``gamma1``) and token layout."""
    bias = student_attn.qkv.bias is not None
    block = MODELS.build(
        dict(
            type='SoftmaxAttention',
            embed_dims=student_attn.embed_dims,
            num_heads=student_attn.num_heads,
            qkv_bias=bias,
        )
    )
    weights = {
        k: v
        for k, v in teacher_attn.state_dict().items()
        if k.split('.')[0] in ('qkv', 'proj')
    }
    block.load_state_dict(weights)
    block.gamma1 = student_attn.gamma1
    block.prefix_tokens = student_attn.prefix_tokens
    return block.to(student_attn.qkv.weight.device).eval()


@contextlib.contextmanager
def softmax_in(student: nn.Module, replacements: dict):
    """The student with the attention of some blocks replaced
    (``{block: module}``), restored on exit."""
    layers = student.backbone.layers
    saved = {b: layers[b].attn for b in replacements}
    try:
        for b, module in replacements.items():
            layers[b].attn = module
        yield student
    finally:
        for b, module in saved.items():
            layers[b].attn = module


@torch.no_grad()
def greedy_kl_blocks(
    teacher: nn.Module,
    student: nn.Module,
    batches: Iterable[Tensor],
    k: int,
    candidates: Sequence[int] | None = None,
) -> tuple[list[int], list[dict]]:
    """Choose ``k`` blocks to keep softmax attention, greedily by logit KL.

    Args:
        teacher (nn.Module): The softmax classifier (``mode='tensor'`` gives
            logits), with ``backbone.layers[i].attn``.
        student (nn.Module): The linear student classifier, same depth.
        batches (Iterable[Tensor]): Preprocessed training images.
        k (int): Blocks to choose.
        candidates (Sequence[int], optional): Blocks to choose from
            (default: all).

    Returns:
        tuple: The chosen blocks in the order chosen, and one record per
        step: ``{'step', 'kl': {block: KL with that block added},
        'chosen', 'kl_before'}``.
    """
    depth = len(student.backbone.layers)
    candidates = list(range(depth) if candidates is None else candidates)
    if not 0 < k <= len(candidates):
        raise ValueError(
            f'Cannot choose {k} of {len(candidates)} candidate blocks.'
        )
    was_training = (teacher.training, student.training)
    teacher.eval()
    student.eval()
    images = list(batches)
    targets = [F.log_softmax(teacher(x, mode='tensor').float(), -1)
               for x in images]  # fmt: skip
    blocks = {
        b: softmax_block(
            student.backbone.layers[b].attn, teacher.backbone.layers[b].attn
        )
        for b in candidates
    }

    def divergence(chosen):
        with softmax_in(student, {b: blocks[b] for b in chosen}):
            kls = [
                logit_kl(t, student(x, mode='tensor'))
                for x, t in zip(images, targets)
            ]
        return sum(kls) / len(kls)

    chosen, steps = [], []
    before = divergence(chosen)
    for step in range(k):
        kl = {b: divergence(chosen + [b]) for b in candidates
              if b not in chosen}  # fmt: skip
        best = min(kl, key=kl.get)
        steps.append(dict(step=step, kl_before=before, kl=kl, chosen=best))
        chosen.append(best)
        before = kl[best]
    teacher.train(was_training[0])
    student.train(was_training[1])
    return chosen, steps
