"""A checkpoint that does not fit the runner's model (load_from,
tools/test.py, --resume) stops the run with an error naming the file and the
keys; ``allow_partial`` opts in to partial loads; the legitimate layouts (a
distiller's student-only checkpoint, ``module.`` prefixes) still load."""

import copy
import os.path as osp
import uuid

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmpretrain.registry import MODELS
from tool_runs import run

from mmlvit.engine.checkpoint_fit import CheckpointMismatchError

TINY = 'tests/data/configs/tiny_softmax_fmnist.py'
DISTILL = 'tests/data/configs/tiny_gla_distill_fmnist.py'
OPT_IN = 'default_hooks.strict_load.allow_partial=True'


def config(repo_root, name, work_dir, **options):
    cfg = Config.fromfile(osp.join(repo_root, name))
    cfg.work_dir = str(work_dir)
    cfg.merge_from_dict(options)  # what --cfg-options does
    return cfg


def save(path, state_dict, **extra):
    torch.save(
        dict(meta=dict(epoch=1, iter=4), state_dict=state_dict, **extra), path
    )
    return path


@pytest.fixture(scope='module')
def ckpts(repo_root, tmp_path_factory):
    """Synthetic checkpoints in mmengine's format: the tiny softmax ViT
    (32 wide, 2 blocks), one 16 wide with 3 blocks, the tiny ViT without
    its second block, and a GLA distiller's student-only checkpoint."""
    init_default_scope('mmpretrain')
    folder = tmp_path_factory.mktemp('ckpts')
    tiny = Config.fromfile(osp.join(repo_root, TINY)).model
    torch.manual_seed(0)
    teacher = MODELS.build(tiny).state_dict()
    other = copy.deepcopy(tiny)
    other.backbone.arch.update(embed_dims=16, num_layers=3)
    other.head.in_channels = 16
    distill = Config.fromfile(osp.join(repo_root, DISTILL)).model
    distill.teacher_checkpoint = str(save(folder / 'teacher.pth', teacher))
    student = MODELS.build(distill).state_dict()
    return dict(
        teacher=folder / 'teacher.pth',
        other=save(folder / 'other.pth', MODELS.build(other).state_dict()),
        shallow=save(
            folder / 'shallow.pth',
            {
                k: v
                for k, v in teacher.items()
                if 'backbone.layers.1.' not in k
            },
        ),
        # Saved from a DDP-wrapped model: the runner strips `module.`.
        student=save(
            folder / 'student.pth',
            {f'module.{k}': v for k, v in student.items()},
        ),
        student_state=student,
    )


def test_test_tool_refuses_a_checkpoint_of_another_architecture(
    ckpts, tmp_path, repo_root, python, fashion_mnist_root
):
    out = run(
        [python, 'tools/test.py', TINY, str(ckpts['other'])]
        + ['--work-dir', str(tmp_path)],
        repo_root,
    )
    assert out.returncode != 0
    error = out.stderr.strip().splitlines()[-1]
    assert f'Checkpoint {ckpts["other"]} does not fit the model' in error
    assert '29 tensors have another shape: backbone.cls_token ' in error
    assert '(file 1x1x16, model 1x1x32)' in error
    assert (
        '12 tensors of the file are not in the model: backbone.layers.2'
        in error
    )
    assert f'--cfg-options {OPT_IN}' in error
    assert 'Epoch(test)' not in out.stdout


def test_load_from_with_missing_weights_stops_before_training(
    ckpts, tmp_path, repo_root, fashion_mnist_root
):
    cfg = config(repo_root, TINY, tmp_path, load_from=str(ckpts['shallow']))
    runner = Runner.from_cfg(cfg)
    with pytest.raises(CheckpointMismatchError) as err:
        runner.train()
    assert str(err.value).startswith(
        f'Checkpoint {ckpts["shallow"]} does not fit the model: 12 model '
        'weights are not in the file: backbone.layers.1.ln1.weight, '
        'backbone.layers.1.ln1.bias, backbone.layers.1.attn.qkv.weight and '
        '9 more.'
    )
    assert not list(tmp_path.glob('epoch_*.pth'))


def test_resume_of_another_architecture_is_refused(
    ckpts, tmp_path, repo_root, fashion_mnist_root
):
    path = tmp_path / 'resumable.pth'
    state = torch.load(ckpts['other'], weights_only=True)['state_dict']
    save(path, state, optimizer=dict(state={}, param_groups=[]))
    cfg = config(repo_root, TINY, tmp_path, load_from=str(path), resume=True)
    runner = Runner.from_cfg(cfg)
    with pytest.raises(
        CheckpointMismatchError, match='resumable.pth does not fit'
    ):
        runner.train()


@pytest.fixture
def tested(repo_root, tmp_path, fashion_mnist_root):
    """tested(name, checkpoint, **options): the Runner of a config of
    tests/data/configs loading ``checkpoint``, after its test loop."""

    def test(name, checkpoint, **options):
        cfg = config(
            repo_root, name, tmp_path, load_from=str(checkpoint), **options
        )
        runner = Runner.from_cfg(cfg)
        runner.test()
        return runner

    return test


def test_allow_partial_loads_what_matches_with_a_warning(
    ckpts, tmp_path, tested
):
    runner = tested(TINY, ckpts['shallow'], **{OPT_IN.split('=')[0]: True})
    expected = torch.load(ckpts['shallow'], weights_only=True)['state_dict']
    loaded = runner.model.state_dict()
    key = 'backbone.layers.0.attn.qkv.weight'
    assert torch.equal(loaded[key], expected[key])
    (log,) = tmp_path.glob('*/*.log')
    assert (
        f'WARNING - Loading only the matching tensors of {ckpts["shallow"]} '
        f'({OPT_IN}): 12 model weights are not in the file'
    ) in log.read_text()


@pytest.mark.parametrize('model', ['distiller', 'classifier'])
def test_student_checkpoint_loads(
    model, ckpts, tmp_path, repo_root, fashion_mnist_root
):
    cfg = config(
        repo_root,
        DISTILL,
        tmp_path,
        load_from=str(ckpts['student']),
        **{'model.teacher_checkpoint': str(ckpts['teacher'])},
    )
    if model == 'classifier':  # the student alone, as tools/test.py runs it
        cfg.model = cfg.model.student
        cfg.custom_hooks = []
    runner = Runner.from_cfg(cfg)
    runner.test()
    assert runner.model.state_dict().keys() == ckpts['student_state'].keys()
    for key, value in runner.model.state_dict().items():
        assert torch.equal(value, ckpts['student_state'][key]), key


def test_position_embedding_of_another_grid_loads_resized(ckpts, tested):
    """A ViT checkpoint of another input size (e.g. a 224-px classifier
    tested or fine-tuned at 512 px) is not a mismatch: the backbone resizes
    its position-embedding table while loading."""
    from mmpretrain.models.utils import resize_pos_embed

    runner = tested(TINY, ckpts['teacher'], **{'model.backbone.img_size': 56})
    saved = torch.load(ckpts['teacher'])['state_dict']
    backbone = runner.model.backbone
    assert backbone.pos_embed.shape[1] == 1 + 8 * 8
    expected = resize_pos_embed(
        saved['backbone.pos_embed'],
        (4, 4),
        (8, 8),
        mode=backbone.interpolate_mode,
        num_extra_tokens=backbone.num_extra_tokens,
    )
    torch.testing.assert_close(backbone.pos_embed.data, expected)
    for key, value in runner.model.state_dict().items():
        if key != 'backbone.pos_embed':
            assert torch.equal(value, saved[key]), key


def init_cfg_runner(repo_root, work_dir, model=None, **options):
    """A runner of the tiny config (or of ``model``, without custom hooks)
    for one training epoch without validation (init_cfg is applied when
    training starts)."""
    cfg = config(repo_root, TINY, work_dir, **options)
    if model is not None:
        cfg.model, cfg.custom_hooks = model, []
    cfg.train_cfg = dict(by_epoch=True, max_epochs=1)
    cfg.param_scheduler = None  # the warm-up lasts the first epoch
    # Its own logger (runners built within a second would share one).
    cfg.experiment_name = f'init_cfg_{uuid.uuid4().hex[:8]}'
    cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = None
    return Runner.from_cfg(cfg)


def test_pretrained_init_of_another_width_stops_before_training(
    ckpts, tmp_path, repo_root, fashion_mnist_root
):
    runner = init_cfg_runner(
        repo_root,
        tmp_path,
        **{
            'model.init_cfg': dict(
                _delete_=True,  # the model's default init_cfg is a list
                type='Pretrained',
                checkpoint=str(ckpts['other']),
            )
        },
    )
    with pytest.raises(CheckpointMismatchError) as err:
        runner.train()
    message = str(err.value)
    assert message.startswith(
        f"init_cfg=dict(type='Pretrained', checkpoint='{ckpts['other']}') "
        'does not fit the ImageClassifier it initialises: 29 tensors have '
        'another shape: backbone.cls_token (file 1x1x16, model 1x1x32), '
    )
    assert '12 tensors of the file are not in the model' in message
    assert 'add allow_partial=True to that init_cfg.' in message
    assert 'SoftmaxToLinearInitHook' not in message
    assert not list(tmp_path.glob('epoch_*.pth'))


def test_backbone_pretrained_init_needs_the_prefix(
    ckpts, tmp_path, repo_root, fashion_mnist_root
):
    """A classifier file given to the backbone without prefix='backbone.'
    matches no key: an error; with the prefix it loads exactly."""
    model = Config.fromfile(osp.join(repo_root, TINY)).model
    init_cfg = dict(type='Pretrained', checkpoint=str(ckpts['teacher']))
    model.backbone.init_cfg = init_cfg
    runner = init_cfg_runner(repo_root, tmp_path, model=model)
    with pytest.raises(
        CheckpointMismatchError,
        match='does not fit the VisionTransformer it initialises: 30 model '
        'weights are not in the file: cls_token, pos_embed, '
        r'patch_embed.projection.weight and 27 more; 32 tensors of the file',
    ):
        runner.train()
    model.backbone.init_cfg.prefix = 'backbone.'
    runner = init_cfg_runner(repo_root, tmp_path / 'ok', model=model)
    runner.model.init_weights()
    saved = torch.load(ckpts['teacher'], weights_only=True)['state_dict']
    for name, value in runner.model.backbone.state_dict().items():
        assert torch.equal(value, saved[f'backbone.{name}']), name


def test_pretrained_init_allow_partial_trains_with_what_fits(
    ckpts, tmp_path, repo_root, fashion_mnist_root
):
    init_cfg = dict(
        _delete_=True,  # the model's default init_cfg is a list
        type='Pretrained',
        checkpoint=str(ckpts['shallow']),
        allow_partial=True,
    )
    runner = init_cfg_runner(
        repo_root, tmp_path, **{'model.init_cfg': init_cfg}
    )
    runner.train()
    assert (tmp_path / 'epoch_1.pth').is_file()
    (log,) = tmp_path.glob('*/*.log')
    assert 'missing keys in source state_dict: backbone.layers.1' in (
        log.read_text()
    )


def test_softmax_file_for_a_linear_student_names_the_conversion(
    ckpts, tmp_path, repo_root, fashion_mnist_root
):
    """A softmax ViT file as the GLA student's init_cfg or load_from: the
    errors name SoftmaxToLinearInitHook and tools/init_student.py."""
    teacher = str(ckpts['teacher'])
    student = Config.fromfile(osp.join(repo_root, DISTILL)).model.student
    conversion = (
        'The file looks like a softmax ViT checkpoint and the model is a '
        'linear-attention student: copy the softmax weights into the student '
        "with custom_hooks=[dict(type='SoftmaxToLinearInitHook', "
        f"checkpoint='{teacher}', setting='MLPCopy')] in the config, or "
        f'offline with python tools/init_student.py CONFIG {teacher} --out '
        'student.pth and then load_from=student.pth.'
    )
    student.backbone.init_cfg = dict(
        type='Pretrained', checkpoint=teacher, prefix='backbone.'
    )
    runner = init_cfg_runner(repo_root, tmp_path, model=student)
    with pytest.raises(CheckpointMismatchError) as err:
        runner.train()
    assert '10 model weights are not in the file: layers.0.attn.gate_down' in (
        str(err.value)
    )
    assert conversion in str(err.value)
    student.backbone.pop('init_cfg')
    runner = init_cfg_runner(
        repo_root, tmp_path / 'load_from', model=student, load_from=teacher
    )
    with pytest.raises(CheckpointMismatchError) as err:
        runner.train()
    assert conversion in str(err.value)
    assert OPT_IN in str(err.value)
