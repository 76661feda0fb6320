"""Hybrid blocks chosen by the logits' KL (greedy): the divergence of each
candidate equals that of the same hybrid built from its config, the
student is left as it was, and choose_hybrid.py --criterion logit-kl
writes the chosen blocks."""

import copy

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS

from mmlvit.diagnostics.hybrid import hybrid_attn_cfg
from mmlvit.diagnostics.kl_selection import greedy_kl_blocks

CONFIG = 'tests/data/configs/tiny_gla_distill_fmnist.py'


@pytest.fixture
def models(tiny_teacher_checkpoint):
    """The tiny teacher and a GLA student holding every teacher tensor of
    its shape (embeddings, norms, MLPs, q/k/v and output projections)."""
    cfg = Config.fromfile(CONFIG)
    cfg.model.teacher_checkpoint = tiny_teacher_checkpoint
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    distiller = MODELS.build(cfg.model)
    teacher, student = distiller.teacher, distiller.student
    own = student.state_dict()
    student.load_state_dict(
        {
            k: v
            for k, v in teacher.state_dict().items()
            if k in own and own[k].shape == v.shape
        },
        strict=False,
    )
    seeds = [torch.Generator().manual_seed(i) for i in range(2)]
    images = [torch.randn(4, 1, 28, 28, generator=g) for g in seeds]
    return cfg, teacher.eval(), student.eval(), images


def kl_of_config_hybrid(cfg, teacher, student, images, blocks):
    """KL(teacher || hybrid) with the hybrid built from its config: the
    student's weights, the teacher's attention in ``blocks``."""
    hybrid_cfg = copy.deepcopy(cfg.model.student)
    backbone = hybrid_cfg.backbone
    backbone.attn_cfg = hybrid_attn_cfg(backbone.attn_cfg, 2, blocks)
    hybrid = MODELS.build(hybrid_cfg).eval()
    state = dict(student.state_dict())
    for b in blocks:
        prefix = f'backbone.layers.{b}.attn.'
        state = {k: v for k, v in state.items() if not k.startswith(prefix)}
        state.update(
            {k: v for k, v in teacher.state_dict().items()
             if k.startswith(prefix)}
        )  # fmt: skip
    hybrid.load_state_dict(state)
    kls = []
    with torch.no_grad():
        for x in images:
            p = F.log_softmax(teacher(x, mode='tensor'), -1)
            q = F.log_softmax(hybrid(x, mode='tensor'), -1)
            kls.append((p.exp() * (p - q)).sum(-1).mean().item())
    return sum(kls) / len(kls)


def test_each_candidate_kl_equals_the_config_built_hybrid(models):
    cfg, teacher, student, images = models
    chosen, steps = greedy_kl_blocks(teacher, student, images, k=1)
    oracle = {
        b: kl_of_config_hybrid(cfg, teacher, student, images, [b])
        for b in (0, 1)
    }
    for b, kl in steps[0]['kl'].items():
        assert kl == pytest.approx(oracle[b], rel=1e-4, abs=1e-7), b
    assert chosen == [min(oracle, key=oracle.get)]
    assert steps[0]['kl_before'] == pytest.approx(
        kl_of_config_hybrid(cfg, teacher, student, images, []), rel=1e-4
    )


def test_every_block_softmax_is_the_teacher_and_the_student_is_restored(
    models,
):
    cfg, teacher, student, images = models
    with torch.no_grad():
        before = student(images[0], mode='tensor')
    chosen, steps = greedy_kl_blocks(teacher, student, images, k=2)
    assert sorted(chosen) == [0, 1]
    # Both blocks softmax with the teacher's weights: the teacher itself.
    assert steps[1]['kl'][chosen[1]] < 1e-6
    assert steps[1]['kl_before'] == steps[0]['kl'][chosen[0]]
    with torch.no_grad():
        assert torch.equal(student(images[0], mode='tensor'), before)
    types = {type(layer.attn).__name__ for layer in student.backbone.layers}
    assert types == {'GatedLinearAttention'}


def test_impossible_counts_are_refused(models):
    _, teacher, student, images = models
    for k in (0, 3):
        with pytest.raises(ValueError, match=f'Cannot choose {k} of 2'):
            greedy_kl_blocks(teacher, student, images, k=k)


def test_choose_hybrid_by_logit_kl(
    tiny_teacher_checkpoint, tmp_path, load_tool, fashion_mnist_root
):
    out = tmp_path / 'kl1.py'
    blocks = load_tool('tools/analysis/choose_hybrid.py').main(
        ['tests/data/configs/tiny_gla_distill_fmnist.py', '--out', str(out)]
        + ['--teacher', tiny_teacher_checkpoint, '--criterion', 'logit-kl']
        + ['--warmup-iters', '2', '--batches', '1', '--keep-softmax', '1']
    )
    selection = Config.fromfile(out).hybrid_selection
    assert selection['criterion'] == 'logit-kl'
    (step,) = selection['steps']
    assert blocks == selection['blocks'] == [step['chosen']]
    assert step['chosen'] == min(step['kl'], key=step['kl'].get)
    types = [
        c['type'] for c in Config.fromfile(out).model.student.backbone.attn_cfg
    ]
    assert types[blocks[0]] == 'SoftmaxAttention'
