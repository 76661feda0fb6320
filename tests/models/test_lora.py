"""Low-rank adapters: LoRALinear's function, add_adapters on a real student,
the merge/unmerge state-dict conversions and the distiller's adapters."""

import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmpretrain.registry import MODELS

from mmlvit.models.lora import (
    LoRALinear,
    adapter_scales,
    add_adapters,
    merge_adapters,
    unmerge_adapters,
)

DISTILL = 'tests/data/configs/tiny_gla_distill_fmnist.py'
QKV = 'backbone.layers.0.attn.qkv'


@pytest.fixture(scope='module')
def configs(repo_root):
    return Config.fromfile(f'{repo_root}/{DISTILL}')


@pytest.fixture
def student(configs):
    torch.manual_seed(0)
    return MODELS.build(configs.student).eval()


def test_lora_linear_is_the_linear_at_init_and_shares_its_parameters():
    torch.manual_seed(0)
    linear = nn.Linear(6, 5)
    lora = LoRALinear(linear, rank=2, alpha=3.0)
    assert lora.weight is linear.weight and lora.bias is linear.bias
    assert [n for n, _ in lora.named_parameters()] == [
        'weight',
        'bias',
        'lora_A',
        'lora_B',
    ]
    assert lora.lora_A.shape == (2, 6) and lora.lora_B.shape == (5, 2)
    assert not lora.lora_B.any() and lora.lora_A.any()
    x = torch.randn(4, 3, 6)
    assert torch.equal(lora(x), linear(x))


def test_lora_linear_adds_the_scaled_low_rank_update():
    torch.manual_seed(0)
    lora = LoRALinear(nn.Linear(6, 5), rank=2, alpha=3.0)
    nn.init.normal_(lora.lora_B)
    x = torch.randn(4, 6)
    W, b, A, B = lora.weight, lora.bias, lora.lora_A, lora.lora_B
    expected = x @ W.T + b + (3.0 / 2) * (x @ A.T) @ B.T
    torch.testing.assert_close(lora(x), expected)
    expected.sum().backward()
    assert all(p.grad is not None and p.grad.any() for p in (W, b, A, B))


def test_add_adapters_replaces_the_attention_projections(student):
    x = torch.randn(2, 1, 28, 28)
    before = student(x)
    names = add_adapters(student, rank=2, alpha=4)
    assert names == [
        f'backbone.layers.{i}.attn.{layer}'
        for layer in ('qkv', 'proj')
        for i in range(2)
    ]
    assert adapter_scales(student) == dict.fromkeys(names, 2.0)
    assert isinstance(student.get_submodule(QKV), LoRALinear)
    assert not isinstance(
        student.get_submodule('backbone.layers.0.attn.g_proj'), LoRALinear
    )
    assert torch.equal(student(x), before)


@pytest.mark.parametrize(
    'kwargs, error',
    [
        (
            dict(targets=['attn.qkvx']),
            "adapters: target 'attn.qkvx' matches no nn.Linear of the model "
            '(a target is the end of a layer name, e.g. attn.qkv; its '
            'linear layers: backbone.layers.*.attn.g_proj, ',
        ),
        (dict(rank=0), 'adapters: rank=0 is not an integer >= 1.'),
        (dict(alpha=0), 'adapters: alpha=0 is not > 0.'),
        (dict(targets=[]), 'adapters: targets is empty.'),
    ],
)
def test_add_adapters_refuses_what_cannot_work(student, kwargs, error):
    with pytest.raises(ValueError) as err:
        add_adapters(student, **kwargs)
    assert str(err.value).startswith(error)


def test_adapting_a_layer_twice_is_refused(student):
    add_adapters(student, targets=['attn.qkv'])
    with pytest.raises(ValueError, match=f'{QKV} has adapters already'):
        add_adapters(student)


def test_merge_gives_a_plain_state_dict_and_unmerge_undoes_it(
    configs, student
):
    names = add_adapters(student, rank=2, alpha=4)
    for name, param in student.named_parameters():
        if 'lora_B' in name:
            nn.init.normal_(param, std=0.1)
    state = student.state_dict()
    plain, unmerged = merge_adapters(state, adapter_scales(student))
    assert not any('lora_' in key for key in plain)
    assert set(unmerged) == {
        f'{name}.{t}' for name in names for t in ('weight', 'lora_A', 'lora_B')
    }
    layer = student.get_submodule(QKV)
    torch.testing.assert_close(
        plain[f'{QKV}.weight'],
        layer.weight + 2.0 * layer.lora_B @ layer.lora_A,
    )
    restored = unmerge_adapters(plain, unmerged)
    assert restored.keys() == state.keys()
    assert all(torch.equal(restored[k], state[k]) for k in state)
    # The plain state dict is a classifier without adapters, computing the
    # same function.
    torch.manual_seed(1)
    bare = MODELS.build(configs.student).eval()
    bare.load_state_dict(plain, strict=True)
    x = torch.randn(2, 1, 28, 28)
    torch.testing.assert_close(bare(x), student(x))


def test_merge_and_unmerge_refuse_incomplete_state_dicts(student):
    add_adapters(student)
    state = student.state_dict()
    scales = adapter_scales(student)
    with pytest.raises(ValueError, match=f'lacks {QKV}.lora_B'):
        merge_adapters(
            {k: v for k, v in state.items() if k != f'{QKV}.lora_B'}, scales
        )
    with pytest.raises(ValueError, match='belong to no adapted layer'):
        merge_adapters(state, {QKV: 1.0})
    plain, unmerged = merge_adapters(state, scales)
    del plain[f'{QKV}.weight']
    with pytest.raises(ValueError, match=f'{QKV}.weight is not in the plain'):
        unmerge_adapters(plain, unmerged)


def test_distiller_adds_adapters_to_its_student(
    configs, tiny_teacher_checkpoint
):
    cfg = configs.model.copy()
    cfg.update(
        teacher_checkpoint=tiny_teacher_checkpoint,
        adapters=dict(rank=3, targets=['attn.proj']),
    )
    distiller = MODELS.build(cfg)
    assert adapter_scales(distiller.student) == {
        f'backbone.layers.{i}.attn.proj': 1.0 for i in range(2)
    }
    assert not adapter_scales(distiller.teacher)
    keys = [k for k in distiller.state_dict() if 'lora_' in k]
    assert keys == [
        f'backbone.layers.{i}.attn.proj.lora_{t}'
        for i in range(2)
        for t in 'AB'
    ]
