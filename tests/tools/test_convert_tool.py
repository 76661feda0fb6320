"""tools/convert.py: a softmax file -> a linear student and its config."""

import os.path as osp
import sys

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS
from safetensors.torch import save_file
from tiny_vit import TIMM_TINY, perturbed_timm_vit

from mmlvit.checkpoint import load_checkpoint_file
from mmlvit.transfer import TransferError, load_softmax_checkpoint, source
from mmlvit.transfer.arch import infer_vit_arch

MLP = (('fc1', 'ffn.layers.0.0'), ('fc2', 'ffn.layers.1'))


def timm_vit(**kwargs):
    """A timm ViT's state dict whose every tensor differs from a fresh
    init."""
    model = perturbed_timm_vit(**kwargs)
    return {k: v.contiguous() for k, v in model.state_dict().items()}


def save(state, path):
    if str(path).endswith('.safetensors'):
        save_file(state, path)
    else:
        torch.save(state, path)
    return path


@pytest.fixture(scope='module')
def deit_tiny():
    """DeiT-Ti's shapes (timm's deit_tiny_patch16_224, 1000 classes)."""
    return timm_vit(embed_dim=192, depth=12, num_heads=3)


def build_written(config_path):
    """The written config's distiller and the student it loads."""
    cfg = Config.fromfile(config_path)
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model)
    saved = load_checkpoint_file(cfg.load_from)
    model.student.load_state_dict(saved['state_dict'], strict=True)
    return cfg, model, saved


@pytest.mark.parametrize('suffix', ['.safetensors', '.pth'])
def test_convert_deit_tiny_to_gla_student(
    suffix, deit_tiny, tmp_path, load_tool, capsys, repo_root, monkeypatch
):
    src = save(deit_tiny, tmp_path / f'deit_tiny_patch16_224{suffix}')
    reads = []

    def counted(path, *args, **kwargs):
        reads.append(path)
        return read(path, *args, **kwargs)

    read = source.load_softmax_checkpoint
    monkeypatch.setattr(source, 'load_softmax_checkpoint', counted)
    out = tmp_path / 'student'
    load_tool('tools/convert.py').main(
        [str(src), '--operator', 'gla', '--setting', 'MLPCopy']
        + ['--arch', 'auto', '--out', str(out)]
    )
    printed = capsys.readouterr().out
    stem = 'deit-tiny-p16_gla_mlpcopy-distill_cifar10'
    config = out / f'{stem}.py'
    assert 'Softmax model: deit-tiny (C=192, 12 layers, 3 heads' in printed
    assert 'Softmax-to-linear init: setting=MLPCopy' in printed
    # A command that runs from any folder; the file is read once.
    train = osp.join(repo_root, 'tools', 'train.py')
    assert f'{sys.executable} {train} {config}' in printed
    assert reads == [str(src)]

    cfg, model, saved = build_written(config)
    assert cfg.model.teacher_checkpoint == str(src)
    assert cfg.load_from == str(out / f'{stem}_init.pth')
    assert saved['meta']['setting'] == 'MLPCopy'
    backbone = model.student.backbone
    assert type(backbone).__name__ == 'LinearVisionTransformer'
    assert len(backbone.layers) == 12 and backbone.embed_dims == 192
    assert type(backbone.layers[0].attn).__name__ == 'GatedLinearAttention'
    assert model.student.head.num_classes == 10  # the recipe's CIFAR-10
    student = model.student.state_dict()
    teacher = model.teacher.state_dict()
    for i in (0, 11):
        for timm_name, name in MLP:
            key = f'backbone.layers.{i}.{name}.weight'
            copied = deit_tiny[f'blocks.{i}.mlp.{timm_name}.weight']
            assert torch.equal(student[key], copied)
            assert torch.equal(teacher[key], copied)
        assert torch.equal(  # the teacher is the file; its attention too
            teacher[f'backbone.layers.{i}.attn.qkv.weight'],
            deit_tiny[f'blocks.{i}.attn.qkv.weight'],
        )
    assert not torch.equal(
        student['backbone.patch_embed.projection.weight'],
        deit_tiny['patch_embed.proj.weight'],
    )
    with torch.no_grad():
        scores = model.student(torch.randn(1, 3, 224, 224), mode='tensor')
    assert scores.shape == (1, 10)


def test_convert_custom_shape_fullcopy(tmp_path, load_tool):
    """A width outside the zoo (64: one head per 64 channels), 1-channel
    32 px images, 8 px patches, 7 classes: the config gets a custom arch."""
    state = timm_vit(
        **dict(TIMM_TINY, embed_dim=64, num_heads=1, num_classes=7)
    )
    src = save(state, tmp_path / 'vit.pth')
    load_tool('tools/convert.py').main(
        [str(src), '--operator', 'ReLULinearAttention', '--setting']
        + ['FullCopy', '--dataset', 'stl10', '--out', str(tmp_path)]
    )
    config = tmp_path / 'vit-c64-l2-p8_relu_fullcopy-distill_stl10.py'
    cfg, model, _ = build_written(config)
    assert cfg.model.student.backbone.arch == dict(
        embed_dims=64, num_layers=2, num_heads=1, feedforward_channels=128
    )
    assert cfg.model.teacher.head.num_classes == 7
    student = model.student.state_dict()
    for key, timm_key in (
        ('backbone.layers.1.attn.qkv.weight', 'blocks.1.attn.qkv.weight'),
        ('backbone.pos_embed', 'pos_embed'),
        ('backbone.patch_embed.projection.weight', 'patch_embed.proj.weight'),
    ):
        assert torch.equal(student[key], state[timm_key])


def test_infer_vit_arch_reads_the_weights_and_names_what_it_cannot():
    state = load_softmax_checkpoint(
        timm_vit(
            img_size=48,
            patch_size=8,
            embed_dim=96,
            depth=3,
            num_heads=4,
            class_token=False,
            global_pool='avg',
            num_classes=0,
        )
    )
    with pytest.raises(TransferError, match='96 wide.*pass the number'):
        infer_vit_arch(state)
    arch = infer_vit_arch(state, num_heads=4)
    assert arch.arch == dict(
        embed_dims=96, num_layers=3, num_heads=4, feedforward_channels=384
    )
    assert (arch.img_size, arch.patch_size, arch.in_channels) == (48, 8, 3)
    assert not arch.with_cls_token and arch.num_classes is None
    state['backbone.pos_embed'] = state['backbone.pos_embed'][:, :-1]
    with pytest.raises(TransferError, match='35 patch positions'):
        infer_vit_arch(state, num_heads=4)


def test_bad_operator_is_named(tmp_path, load_tool):
    with pytest.raises(SystemExit):
        load_tool('tools/convert.py').main(
            [str(tmp_path / 'x.pth'), '--operator', 'lstm', '--out', 'x']
        )
    assert not osp.exists('x')
