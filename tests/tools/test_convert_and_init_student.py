"""tools/convert/timm_to_mmpretrain.py and tools/init_student.py."""

import os.path as osp

import pytest
import torch
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from safetensors.torch import load_file
from tiny_vit import (
    TIMM_TINY,
    backbone_cfg,
    classifier_cfg,
    perturbed_timm_vit,
)
from tool_runs import run_ok

from mmlvit.checkpoint import CheckpointError, load_checkpoint_file
from mmlvit.transfer import TransferError

TINY = 'tests/data/configs/tiny_softmax_fmnist.py'


def tiny_classifier(attn=None):
    init_default_scope('mmpretrain')
    return MODELS.build(classifier_cfg(backbone_cfg(attn))).eval()


@pytest.fixture(scope='module')
def timm_vit(tmp_path_factory):
    """A tiny timm ViT (the tiny config's shape) saved as a timm file."""
    model = perturbed_timm_vit(**TIMM_TINY)
    path = tmp_path_factory.mktemp('timm') / 'tiny_vit.pth'
    torch.save(model.state_dict(), path)
    return model, path


def test_convert_cli(timm_vit, tmp_path, repo_root, python):
    model, path = timm_vit
    dst = tmp_path / 'out' / 'tiny_mmpretrain.pth'
    out = run_ok(
        [python, 'tools/convert/timm_to_mmpretrain.py', str(path), str(dst)],
        repo_root,
        timeout=300,
    )
    assert f'to {dst}' in out.stdout
    state = load_checkpoint_file(dst)['state_dict']
    classifier = tiny_classifier()
    classifier.load_state_dict(state, strict=True)
    image = torch.randn(2, 1, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(
            classifier(image, mode='tensor'),
            model(image),
            rtol=1e-5,
            atol=1e-5,
        )


def test_convert_to_safetensors_and_errors(timm_vit, tmp_path, load_tool):
    tool = load_tool('tools/convert/timm_to_mmpretrain.py')
    _, path = timm_vit
    dst = tmp_path / 'tiny.safetensors'
    tool.main([str(path), str(dst), '--format', 'timm'])
    state = load_file(dst)
    assert 'backbone.layers.1.ffn.layers.1.weight' in state
    with pytest.raises(SystemExit):
        tool.main([str(path), str(dst), '--format', 'tf'])
    with pytest.raises(
        CheckpointError, match=r"tiny_vit\.pth is not a 'mocov3' checkpoint"
    ):
        tool.main([str(path), str(dst), '--format', 'mocov3'])


def write_student_config(tmp_path, repo_root, distill_from=None):
    student = classifier_cfg(backbone_cfg('ReLULinearAttention'))
    model = student
    if distill_from is not None:
        model = dict(
            type='AttentionDistiller',
            student=student,
            teacher=classifier_cfg(backbone_cfg()),
            teacher_checkpoint=str(distill_from),
        )
    path = tmp_path / f'student_{distill_from is not None}.py'
    path.write_text(
        f"_base_ = ['{osp.join(repo_root, TINY)}']\n"
        f'model = {model!r}\n'
        "model['_delete_'] = True\n"
    )
    return path


def test_init_student_mlpcopy(
    timm_vit, tmp_path, repo_root, capsys, load_tool
):
    tool = load_tool('tools/init_student.py')
    _, path = timm_vit
    config = write_student_config(tmp_path, repo_root)
    out_file = tmp_path / 'init' / 'student.pth'
    tool.main(
        [
            str(config),
            str(path),
            '--setting',
            'MLPCopy',
            '--out',
            str(out_file),
        ]
    )
    assert 'Softmax-to-linear init: setting=MLPCopy' in capsys.readouterr().out
    saved = load_checkpoint_file(out_file)
    softmax = torch.load(path, weights_only=True)
    state = saved['state_dict']
    for i in range(2):
        for timm_name, name in (
            ('fc1', 'ffn.layers.0.0'),
            ('fc2', 'ffn.layers.1'),
        ):
            for kind in ('weight', 'bias'):
                assert torch.equal(
                    state[f'backbone.layers.{i}.{name}.{kind}'],
                    softmax[f'blocks.{i}.mlp.{timm_name}.{kind}'],
                )
        assert not torch.equal(
            state[f'backbone.layers.{i}.attn.qkv.weight'],
            softmax[f'blocks.{i}.attn.qkv.weight'],
        )
    assert saved['meta']['setting'] == 'MLPCopy'
    # An ordinary classifier checkpoint: it loads strictly.
    tiny_classifier('ReLULinearAttention').load_state_dict(state, strict=True)


def test_init_student_seeded_components_and_distiller(
    timm_vit, tmp_path, repo_root, load_tool
):
    tool = load_tool('tools/init_student.py')
    _, path = timm_vit
    config = write_student_config(tmp_path, repo_root)
    runs = []
    for seed, name in ((3, 'a.pth'), (3, 'b.pth'), (4, 'c.pth')):
        tool.main(
            [
                str(config),
                str(path),
                '--components',
                'head',
                'norms',
                '--seed',
                str(seed),
                '--out',
                str(tmp_path / name),
            ]
        )
        runs.append(load_checkpoint_file(tmp_path / name)['state_dict'])
    softmax = torch.load(path, weights_only=True)
    assert torch.equal(
        runs[0]['head.layers.head.weight'], softmax['head.weight']
    )
    assert torch.equal(
        runs[0]['backbone.layers.1.ln2.bias'], softmax['blocks.1.norm2.bias']
    )
    key = 'backbone.layers.0.ffn.layers.0.0.weight'
    assert torch.equal(runs[0][key], runs[1][key])  # same seed
    assert not torch.equal(runs[0][key], runs[2][key])

    distill = write_student_config(tmp_path, repo_root, distill_from=path)
    tool.main(
        [
            str(distill),
            str(path),
            '--setting',
            'FullCopy',
            '--out',
            str(tmp_path / 'd.pth'),
        ]
    )
    state = load_checkpoint_file(tmp_path / 'd.pth')['state_dict']
    assert not any(k.startswith(('teacher.', 'student.')) for k in state)
    assert torch.equal(
        state['backbone.layers.0.attn.qkv.weight'],
        softmax['blocks.0.attn.qkv.weight'],
    )


def test_init_student_shape_mismatch(timm_vit, tmp_path, repo_root, load_tool):
    tool = load_tool('tools/init_student.py')
    config = write_student_config(tmp_path, repo_root)
    wide = perturbed_timm_vit(**dict(TIMM_TINY, embed_dim=48, mlp_ratio=4.0))
    path = tmp_path / 'wide.safetensors'
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in wide.state_dict().items()}, path)
    with pytest.raises(
        TransferError,
        match=r'backbone\.layers\.0\.ffn\.layers\.0\.0\.weight:'
        r' checkpoint \(192, 48\) vs student \(64, 32\)',
    ):
        tool.main([str(config), str(path), '--out', str(tmp_path / 'x.pth')])
    assert not (tmp_path / 'x.pth').exists()


def test_init_student_takes_the_checkpoint_once_for_a_distiller(
    tiny_teacher_checkpoint, tmp_path, repo_root, load_tool
):
    """A distillation config without model.teacher_checkpoint: the
    positional checkpoint is the teacher too."""
    tool = load_tool('tools/init_student.py')
    out_file = tmp_path / 'student.pth'
    tool.main(
        [
            osp.join(
                repo_root, 'tests/data/configs/tiny_gla_distill_fmnist.py'
            ),
            tiny_teacher_checkpoint,
            '--setting',
            'MLPCopy',
            '--out',
            str(out_file),
        ]
    )
    state = load_checkpoint_file(out_file)['state_dict']
    softmax = load_checkpoint_file(tiny_teacher_checkpoint)['state_dict']
    key = 'backbone.layers.1.ffn.layers.0.0.weight'
    assert torch.equal(state[key], softmax[key])
