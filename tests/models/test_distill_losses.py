"""The attention distillation losses against explicit float64 formulas
(LogitKD: test_distill_logit_kd.py)."""

import math
import types

import pytest
import torch
from mmpretrain.models.utils import MultiheadAttention
from mmpretrain.registry import MODELS

import mmlvit.models  # noqa: F401

RECORDS = ('outputs', 'inputs', 'modules', 'logits')


def recording(depth=3, extra=1, **records):
    """A stand-in AttentionRecording of ``depth`` blocks and ``extra``
    tokens; each of RECORDS not given in ``records`` is None."""
    assert set(records) <= set(RECORDS), records
    fields = dict(dict.fromkeys(RECORDS), **records)
    return types.SimpleNamespace(depth=depth, num_extra_tokens=extra, **fields)


def random_outputs(depth, tokens, seed):
    gen = torch.Generator().manual_seed(seed)
    return {i: torch.randn(2, tokens, 8, generator=gen) for i in range(depth)}


def naive_mse(a, b):
    """mean((a - b)^2) by an explicit float64 loop."""
    a, b = a.double().flatten().tolist(), b.double().flatten().tolist()
    return sum((x - y) ** 2 for x, y in zip(a, b)) / len(a)


# AttentionOutputMSE ---------------------------------------------------------


def test_output_mse_is_lambda_times_mean_block_mse():
    s, t = random_outputs(3, 5, 0), random_outputs(3, 5, 1)
    loss = MODELS.build(dict(type='AttentionOutputMSE'))
    value, logs = loss(recording(outputs=s), recording(outputs=t))
    per_block = [naive_mse(s[i], t[i]) for i in range(3)]
    assert value.item() == pytest.approx(50 * sum(per_block) / 3, rel=1e-6)
    assert set(logs) == {'attn_out_mse.0', 'attn_out_mse.1', 'attn_out_mse.2'}
    for i in range(3):
        assert logs[f'attn_out_mse.{i}'].item() == pytest.approx(
            per_block[i], rel=1e-6
        )
        assert not logs[f'attn_out_mse.{i}'].requires_grad


def test_output_mse_blocks_and_patch_tokens():
    s, t = random_outputs(3, 5, 0), random_outputs(3, 5, 1)
    loss = MODELS.build(
        dict(
            type='AttentionOutputMSE',
            loss_weight=2.0,
            blocks=[-1, 0],
            tokens='patch',
        )
    )
    value, logs = loss(recording(outputs=s), recording(outputs=t))
    per_block = [naive_mse(s[i][:, 1:], t[i][:, 1:]) for i in (0, 2)]
    assert value.item() == pytest.approx(sum(per_block), rel=1e-6)
    assert set(logs) == {'attn_out_mse.0', 'attn_out_mse.2'}


def test_output_mse_matches_patches_when_only_teacher_has_class_token():
    s, t = random_outputs(2, 4, 0), random_outputs(2, 5, 1)
    loss = MODELS.build(dict(type='AttentionOutputMSE', loss_weight=1.0))
    value, _ = loss(
        recording(depth=2, extra=0, outputs=s),
        recording(depth=2, extra=1, outputs=t),
    )
    expected = sum(naive_mse(s[i], t[i][:, 1:]) for i in range(2)) / 2
    assert value.item() == pytest.approx(expected, rel=1e-6)


def test_output_mse_gradient_reaches_the_student_only():
    s = {i: v.requires_grad_() for i, v in random_outputs(2, 5, 0).items()}
    t = random_outputs(2, 5, 1)
    loss = MODELS.build(dict(type='AttentionOutputMSE', loss_weight=3.0))
    loss(recording(depth=2, outputs=s), recording(depth=2, outputs=t))[
        0
    ].backward()
    # d/ds [3 * mean_i mean((s_i - t_i)^2)] = 3 * 2 (s - t) / (numel * 2)
    for i in range(2):
        torch.testing.assert_close(
            s[i].grad, 3 * (s[i] - t[i]).detach() / s[i].numel()
        )


@pytest.mark.parametrize(
    'kwargs, error, match',
    [
        (dict(tokens='cls'), ValueError, 'tokens must be one of'),
        (dict(blocks=[]), ValueError, 'non-empty list'),
        (dict(blocks=3), ValueError, "blocks must be 'all'"),
        (dict(blocks=['0']), ValueError, "blocks must be 'all'"),
    ],
)
def test_output_mse_refuses_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        MODELS.build(dict(type='AttentionOutputMSE', **kwargs))


def test_output_mse_errors_on_mismatched_grids_and_blocks():
    loss = MODELS.build(dict(type='AttentionOutputMSE', blocks=[3]))
    with pytest.raises(IndexError, match='block 3 does not exist'):
        loss.block_indices(3)
    loss = MODELS.build(dict(type='AttentionOutputMSE'))
    with pytest.raises(ValueError, match='5 patch tokens, the teacher 4'):
        loss(
            recording(depth=1, extra=0, outputs=random_outputs(1, 5, 0)),
            recording(depth=1, extra=1, outputs=random_outputs(1, 5, 1)),
        )
    with pytest.raises(ValueError, match='num_extra_tokens'):
        loss(
            recording(depth=1, extra=None, outputs=random_outputs(1, 4, 0)),
            recording(depth=1, extra=1, outputs=random_outputs(1, 5, 1)),
        )


# AttentionMapMSE ------------------------------------------------------------

C, HEADS, HW = 8, 2, (2, 2)


def naive_softmax_map(qkv, x):
    """softmax(q k^T / sqrt(d)) entry by entry, float64: (B, h, N, N)."""
    W, b = qkv.weight.detach().double(), qkv.bias.detach().double()
    x = x.double()
    B, N, _ = x.shape
    d = C // HEADS
    out = torch.zeros(B, HEADS, N, N, dtype=torch.float64)
    for n in range(B):
        proj = x[n] @ W.T + b
        for h in range(HEADS):
            q = proj[:, h * d : (h + 1) * d]
            k = proj[:, C + h * d : C + (h + 1) * d]
            for i in range(N):
                logits = [float(q[i] @ k[j]) / math.sqrt(d) for j in range(N)]
                top = max(logits)
                z = sum(math.exp(v - top) for v in logits)
                for j in range(N):
                    out[n, h, i, j] = math.exp(logits[j] - top) / z
    return out


def kernel_map64(weight, bias, x, phi, eps=1e-6):
    """diag(phi(Q) phi(K)^T 1 + eps)^-1 phi(Q) phi(K)^T, float64, written
    out per head so that it can be differentiated w.r.t. ``weight``."""
    proj = x.double() @ weight.T + bias
    B, N, _ = x.shape
    d = C // HEADS
    maps = []
    for h in range(HEADS):
        q = phi(proj[..., h * d : (h + 1) * d])
        k = phi(proj[..., C + h * d : C + (h + 1) * d])
        scores = torch.einsum('bid,bjd->bij', q, k)
        maps.append(scores / (scores.sum(-1, keepdim=True) + eps))
    return torch.stack(maps, 1)


def map_setup(student_type, student_tokens=5, seed=0, depth=2):
    torch.manual_seed(seed)
    students = [
        MODELS.build(dict(type=student_type, embed_dims=C, num_heads=HEADS))
        for _ in range(depth)
    ]
    teachers = [MultiheadAttention(C, HEADS) for _ in range(depth)]
    x_s = {i: torch.randn(2, student_tokens, C) for i in range(depth)}
    x_t = {i: torch.randn(2, 5, C) for i in range(depth)}
    student = recording(
        depth=depth,
        extra=student_tokens - 4,
        modules=students,
        inputs={i: ((x_s[i], HW), {}) for i in range(depth)},
    )
    teacher = recording(
        depth=depth,
        extra=1,
        modules=teachers,
        inputs={i: ((x_t[i],), {}) for i in range(depth)},
    )
    return student, teacher, x_s, x_t


PHI = {
    'ReLULinearAttention': torch.relu,
    'ELULinearAttention': lambda x: torch.nn.functional.elu(x) + 1,
}


@pytest.mark.parametrize('student_type', sorted(PHI))
def test_map_mse_matches_naive_maps(student_type):
    student, teacher, x_s, x_t = map_setup(student_type)
    loss = MODELS.build(dict(type='AttentionMapMSE', loss_weight=1e4))
    value, logs = loss(student, teacher)

    weights = [
        m.qkv.weight.detach().double().requires_grad_()
        for m in student.modules
    ]
    per_block = []
    for i in range(2):
        t_map = naive_softmax_map(teacher.modules[i].qkv, x_t[i])
        s_map = kernel_map64(
            weights[i],
            student.modules[i].qkv.bias.detach().double(),
            x_s[i],
            PHI[student_type],
        )
        per_block.append(((s_map - t_map) ** 2).mean())
        assert logs[f'attn_map_mse.{i}'].item() == pytest.approx(
            per_block[i].item(), rel=1e-5
        )
    expected = 1e4 * torch.stack(per_block).mean()
    assert value.item() == pytest.approx(expected.item(), rel=1e-5)

    # The gradient through the checkpointed maps is the oracle's.
    value.backward()
    expected.backward()
    for module, weight in zip(student.modules, weights):
        scale = weight.grad.abs().max().item()
        assert scale > 0
        torch.testing.assert_close(
            module.qkv.weight.grad.double(),
            weight.grad,
            rtol=1e-4,
            atol=1e-5 * scale,
        )
    assert all(p.grad is None for m in teacher.modules for p in m.parameters())


def relu_map64(module, x):
    """kernel_map64 of a ReLU-kernel module's (detached) qkv on ``x``."""
    weight = module.qkv.weight.detach().double()
    return kernel_map64(
        weight, module.qkv.bias.detach().double(), x, torch.relu
    )


def test_map_mse_patch_block_when_only_teacher_has_class_token():
    student, teacher, x_s, x_t = map_setup(
        'ReLULinearAttention', student_tokens=4, depth=1
    )
    loss = MODELS.build(dict(type='AttentionMapMSE', loss_weight=1.0))
    value, _ = loss(student, teacher)
    s_map = relu_map64(student.modules[0], x_s[0])
    t_map = naive_softmax_map(teacher.modules[0].qkv, x_t[0])[..., 1:, 1:]
    assert s_map.shape == t_map.shape == (2, HEADS, 4, 4)
    assert value.item() == pytest.approx(
        ((s_map - t_map) ** 2).mean().item(), rel=1e-5
    )


def test_map_mse_query_subsampling():
    student, teacher, x_s, x_t = map_setup('ReLULinearAttention', depth=1)
    loss = MODELS.build(
        dict(type='AttentionMapMSE', loss_weight=1.0, num_queries=2)
    )
    torch.manual_seed(7)
    value, _ = loss(student, teacher)
    torch.manual_seed(7)
    rows = torch.randperm(5)[:2]
    s_map = relu_map64(student.modules[0], x_s[0])
    t_map = naive_softmax_map(teacher.modules[0].qkv, x_t[0])
    per_row = ((s_map - t_map) ** 2).mean(dim=(0, 1, 3))
    assert value.item() == pytest.approx(per_row[rows].mean().item(), rel=1e-5)
    assert value.item() != pytest.approx(per_row.mean().item(), rel=1e-3)
    with pytest.raises(ValueError, match='num_queries'):
        MODELS.build(
            dict(type='AttentionMapMSE', loss_weight=1.0, num_queries=0)
        )


def test_map_mse_keeps_no_map_alive_between_blocks():
    """No (B, h, N, N) tensor is saved for backward outside the per-block
    checkpoints; the same probe does see one in a direct computation."""
    student, teacher, _, _ = map_setup('ReLULinearAttention', depth=2)
    loss = MODELS.build(dict(type='AttentionMapMSE', loss_weight=1.0))
    map_shape = (2, HEADS, 5, 5)

    def saved_shapes(fn):
        shapes = []

        def pack(t):
            shapes.append(tuple(t.shape))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn()
        return shapes

    assert map_shape not in saved_shapes(lambda: loss(student, teacher))
    m, (args, _) = student.modules[0], student.inputs[0]
    assert map_shape in saved_shapes(lambda: m.attention_map(*args).sum())


def test_map_mse_refuses_modules_without_map():
    loss = MODELS.build(dict(type='AttentionMapMSE', loss_weight=1.0))
    ttt = MODELS.build(
        dict(type='TTTAttention', embed_dims=C, num_heads=HEADS)
    )
    with pytest.raises(TypeError, match='TTTAttention has no N x N'):
        loss.check_modules([ttt], [MultiheadAttention(C, HEADS)])
    with pytest.raises(TypeError, match='teacher block 0'):
        loss.check_modules(
            [MultiheadAttention(C, HEADS)], [torch.nn.Linear(C, C)]
        )
