"""Config mistakes that mmengine reports late (a scheduler left with no
epoch, a head count that does not divide the width) stop tools/train.py and
tools/test.py before anything is built, naming the fields; every shipped
config passes the checks and guards its updates against non-finite
losses."""

import importlib.util
import os.path as osp

import pytest
from mmengine.config import Config

# The session's parsed configs (parsed once for all config tests).
from test_configs import EXPERIMENTS, ROOT, load

from mmlvit.engine.config_checks import check_config, check_override_keys

SOFTMAX = 'configs/fashion_mnist/vit-tiny-p4_softmax_fashion-mnist.py'
DISTILL = (
    'configs/fashion_mnist/vit-tiny-p4_gla_copy-distill_fashion-mnist-5k.py'
)


def tool(name):
    spec = importlib.util.spec_from_file_location(
        f'mmlvit_{name}_tool', osp.join(ROOT, 'tools', f'{name}.py')
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_tool_names_a_scheduler_left_without_epochs():
    """The one-epoch warm-up with max_epochs=1 (mmengine would say 'end
    should be larger than begin, but got begin=79, end=79')."""
    with pytest.raises(ValueError) as error:
        tool('train').main(
            [
                osp.join(ROOT, SOFTMAX),
                '--cfg-options',
                'train_cfg.max_epochs=1',
            ]
        )
    assert str(error.value) == (
        'param_scheduler[1] (CosineAnnealingLR) begins at epoch 1, where '
        'param_scheduler[0] (LinearLR) ends, and runs to the end of '
        'training, but train_cfg.max_epochs=1 ends training there: it would '
        'cover no epoch (mmengine stops with "end should be larger than '
        'begin"). Set train_cfg.max_epochs above 1, or make the schedulers '
        'before it end earlier.'
    )


def test_test_tool_names_a_head_count_that_does_not_divide():
    """mmpretrain's VisionTransformer would fail at the first forward."""
    with pytest.raises(ValueError) as error:
        tool('test').main(
            [
                osp.join(ROOT, SOFTMAX),
                'never_read.pth',
                '--cfg-options',
                'model.backbone.arch.num_heads=3',
                'train_cfg.max_epochs=1',  # test.py checks no schedule
            ]
        )
    assert str(error.value) == (
        'model.backbone.arch.num_heads=3 does not divide embed_dims=64: '
        'every attention head takes embed_dims / num_heads channels. Set '
        'model.backbone.arch.num_heads to a divisor of 64, e.g. 2 or 4.'
    )


def test_train_tool_names_a_misspelled_override_key():
    """merge_from_dict would add 'trian_cfg' and train the old schedule."""
    with pytest.raises(ValueError) as error:
        tool('train').main(
            [
                osp.join(ROOT, SOFTMAX),
                '--cfg-options',
                'trian_cfg.max_epochs=5',
                'model.head.num_classes=10',
            ]
        )
    assert str(error.value) == (
        '--cfg-options trian_cfg.max_epochs: the config has no key '
        "'trian_cfg'; did you mean 'train_cfg' (train_cfg.max_epochs)?"
    )


def test_override_keys_the_runner_reads_are_accepted():
    """Keys a config may leave out but the Runner reads (experiment_name,
    log_processor, ...), and new keys close to none, pass."""
    cfg = load(SOFTMAX)
    assert 'experiment_name' not in cfg and 'log_processor' not in cfg
    check_override_keys(
        cfg,
        {'experiment_name': 'a', 'log_processor.window_size': 5, 'note': 1},
    )


def test_every_arch_is_checked_teacher_included():
    cfg = load(DISTILL)
    cfg.model.teacher.backbone.arch.num_heads = 6
    with pytest.raises(ValueError) as error:
        check_config(cfg)
    assert str(error.value).startswith(
        'model.teacher.backbone.arch.num_heads=6 does not divide embed_dims=64'
    )
    assert 'e.g. 4 or 8.' in str(error.value)


def test_iteration_based_schedules():
    def problems(*schedulers, max_iters=100):
        cfg = Config(
            dict(
                train_cfg=dict(type='IterBasedTrainLoop', max_iters=max_iters),
                param_scheduler=list(schedulers),
            )
        )
        try:
            check_config(cfg)
        except ValueError as error:
            return str(error)
        return None

    warmup = dict(type='LinearLR', by_epoch=False, begin=0, end=100)
    cosine = dict(type='CosineAnnealingLR', by_epoch=False, begin=100)
    assert problems(warmup, cosine, max_iters=101) is None
    assert problems(warmup, cosine).startswith(
        'param_scheduler[1] (CosineAnnealingLR) begins at iter 100, where '
        'param_scheduler[0] (LinearLR) ends, and runs to the end of '
        'training, but train_cfg.max_iters=100 ends training there'
    )
    assert problems(dict(warmup, begin=100)) == (
        'param_scheduler[0] (LinearLR) ends at iter 100, not after its '
        'begin 100: set param_scheduler[0].end above param_scheduler[0].'
        'begin.'
    )
    # Epoch-based schedulers count another unit: not compared.
    assert problems(dict(cosine, by_epoch=True)) is None


def test_shipped_configs_pass_and_skip_non_finite_updates():
    for path in EXPERIMENTS:
        cfg = load(path)
        check_config(cfg)
        assert cfg.optim_wrapper.type == 'SkipNonFiniteOptimWrapper', path
