"""Conversion recipes measured side by side: the paper's one-stage recipe
and the staged, hybrid and full-inheritance variants of later conversion
work, each an :class:`Arm` applied to the same distillation run config.

Every arm trains the same total epochs on the same target from the same
teacher; a staged arm splits them between its stages in the proportions
of :attr:`Arm.stages` (docs/recipes.md gives the split at 10 epochs).
"""

import os.path as osp
from dataclasses import dataclass

from mmlvit.models.losses import PAPER_DISTILL_WEIGHT

from .configs import run_config
from .records import Run

DATASET = 'fashion-mnist-5k'
# Iterations of distillation before a hybrid's blocks are measured.
WARMUP_ITERS = 100

ALIGN_ATTENTION = dict(task_loss=False, trainable=['attn'])
ALIGN_FEATURES = dict(task_loss=False, losses=dict(FinalFeatureAlignment=50.0))
LOGIT_KD = dict(type='LogitKD', loss_weight=0.0)
FEATURES = dict(type='FinalFeatureAlignment', loss_weight=0.0)
LORA_ADAPTERS = dict(rank=4, alpha=4, targets=['attn.qkv', 'attn.proj'])


@dataclass(frozen=True)
class Arm:
    """One recipe of the study.

    Attributes:
        name (str): The CSV's ``arm``.
        summary (str): One line for the tables.
        setting (str): Copy setting short name (``mmlvit.transfer``).
        operator (str | None): Operator short name; None: the study's
            operator.
        stages (tuple[tuple[int, dict], ...]): (share of the epochs,
            ConversionStagesHook stage without its length) per stage; empty:
            one stage, the paper's.
        losses (tuple[dict, ...]): Distillation losses added to the paper's
            AttentionOutputMSE at weight 0 (stages turn them on).
        adapters (dict | None): The distiller's low-rank adapters.
        hybrid (str | None): How the block kept softmax is chosen:
            ``'logit-kl'`` or ``'block-error'``.
        reference (str | None): The arm it is compared with (None: it is
            a baseline).
    """

    name: str
    summary: str
    setting: str = 'mlpcopy'
    operator: str | None = None
    stages: tuple = ()
    losses: tuple = ()
    adapters: dict | None = None
    hybrid: str | None = None
    reference: str | None = 'paper'


ARMS = {
    arm.name: arm
    for arm in (
        Arm(
            'paper',
            "MLPCopy, task + 50 x attention-output MSE (the paper's)",
            reference=None,
        ),
        Arm(
            'logit-kd',
            'align attention outputs (attention only), then task + MSE + '
            'logit KD (RADLADS)',
            stages=((2, ALIGN_ATTENTION), (3, dict(losses=dict(LogitKD=1.0)))),
            losses=(LOGIT_KD,),
        ),
        Arm(
            'kd-stage',
            "the paper's recipe, then the same with logit KD added",
            stages=((2, {}), (3, dict(losses=dict(LogitKD=1.0)))),
            losses=(LOGIT_KD,),
        ),
        Arm(
            'features',
            'align attention outputs, then final features (no task loss), '
            'then task + MSE (ViT-AdaLA)',
            stages=((3, ALIGN_ATTENTION), (3, ALIGN_FEATURES), (4, {})),
            losses=(FEATURES,),
        ),
        Arm(
            'feature-stage',
            "the paper's recipe, then final features + MSE (no task loss), "
            'then task + MSE',
            stages=((3, {}), (3, ALIGN_FEATURES), (4, {})),
            losses=(FEATURES,),
        ),
        Arm(
            'lora',
            "the paper's recipe, then only rank-4 adapters on the attention "
            'projections and the head (LoLCATs)',
            stages=((2, {}), (3, dict(trainable=['lora_', 'head']))),
            adapters=LORA_ADAPTERS,
        ),
        Arm(
            'kl-hybrid',
            "one block kept softmax, chosen by the logits' KL (GA-S2), then "
            "the paper's recipe",
            hybrid='logit-kl',
        ),
        Arm(
            'error-hybrid',
            'one block kept softmax, chosen by attention-output error, then '
            "the paper's recipe",
            hybrid='block-error',
        ),
        Arm(
            'ttt-mlpcopy',
            "TTT, the paper's recipe",
            operator='ttt',
            reference=None,
        ),
        Arm(
            'ttt-fullcopy',
            'TTT, every weight inherited (Transformer-to-TTT), then the '
            "paper's recipe",
            setting='tttfullcopy',
            operator='ttt',
            reference='ttt-mlpcopy',
        ),
    )
}


def split_epochs(epochs: int, shares) -> list[int]:
    """``epochs`` split between stages: one epoch each, the rest in
    proportion to ``shares`` (largest remainders get the rounding).

    Raises:
        ValueError: Fewer epochs than stages.
    """
    if epochs < len(shares):
        raise ValueError(
            f'{epochs} epochs cannot hold {len(shares)} stages of at least '
            'one epoch each.'
        )
    rest = epochs - len(shares)
    exact = [rest * s / sum(shares) for s in shares]
    split = [int(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: split[i] - exact[i])
    for i in order[: rest - sum(split)]:
        split[i] += 1
    return [1 + n for n in split]


def arm_operator(arm: Arm, operator: str) -> str:
    """The operator an arm trains: its own, else the study's."""
    return arm.operator or operator


def arm_config(
    arm: Arm,
    operator: str,
    epochs: int,
    seed: int,
    teacher: str,
    work_dir: str,
):
    """The mmengine config of one arm's run, before any hybrid block is
    chosen (:func:`keep_softmax` does that)."""
    run = Run(
        DATASET,
        arm_operator(arm, operator),
        arm.setting,
        True,
        PAPER_DISTILL_WEIGHT,
        epochs,
        seed,
    )
    cfg = run_config(run, teacher, work_dir)
    cfg.model.distill_losses = [*cfg.model.distill_losses, *arm.losses]
    if arm.adapters:
        cfg.model.adapters = dict(arm.adapters)
    if arm.stages:
        lengths = split_epochs(epochs, [share for share, _ in arm.stages])
        stages = [
            dict(epochs=n, **stage)
            for n, (_, stage) in zip(lengths, arm.stages)
        ]
        cfg.custom_hooks.append(
            dict(type='ConversionStagesHook', stages=stages)
        )
    return cfg


def stage_text(cfg) -> str:
    """The run's epochs per stage, e.g. ``'4+6'``."""
    for hook in cfg.custom_hooks:
        if hook['type'] == 'ConversionStagesHook':
            return '+'.join(str(s['epochs']) for s in hook['stages'])
    return str(cfg.train_cfg['max_epochs'])


def keep_softmax(
    cfg, criterion: str, work_dir: str, warmup_iters: int = WARMUP_ITERS
) -> tuple[list, str]:
    """Choose one block to keep softmax attention after a warm-up of
    ``warmup_iters`` distillation iterations (the same for both criteria)
    and turn ``cfg`` into that hybrid (teacher's attention weights copied).

    Returns:
        tuple: The chosen blocks and the measurements, one text per block.
    """
    from mmlvit.diagnostics.hybrid import (
        make_hybrid,
        measure_blocks,
        warm_up,
    )
    from mmlvit.diagnostics.kl_selection import greedy_kl_blocks

    warmup_dir = osp.join(work_dir, 'warmup')
    if criterion == 'logit-kl':
        distiller, images = warm_up(cfg, warmup_iters, warmup_dir)
        blocks, steps = greedy_kl_blocks(
            distiller.teacher, distiller.student, images, 1
        )
        scores = steps[0]['kl']
    elif criterion == 'block-error':
        diagnosis = measure_blocks(cfg, warmup_iters, warmup_dir)
        blocks = diagnosis.worst_blocks(1, 'attn_rel_err')
        scores = {r['block']: r['attn_rel_err'] for r in diagnosis.blocks}
    else:
        raise ValueError(f'Unknown hybrid criterion {criterion!r}.')
    make_hybrid(cfg, blocks)
    return sorted(blocks), ' '.join(f'{scores[b]:.4f}' for b in sorted(scores))
