"""Every config parses and builds its model; the flagship trains a few
iterations end to end on tiny data with a synthetic DeiT-B checkpoint."""

import ast
import copy
import functools
import glob
import os.path as osp
import subprocess
import tempfile

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS, TRANSFORMS
from process_memory import release_memory

from mmlvit.checkpoint import load_checkpoint_file

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
ALL_CONFIGS = sorted(
    osp.relpath(p, ROOT)
    for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)
)
# Dense (MMSegmentation / MMDetection) configs: tests/configs/
# test_dense_configs.py.
DENSE_CONFIGS = [c for c in ALL_CONFIGS if 'dense' in c]
DENSE_EXPERIMENTS = [c for c in DENSE_CONFIGS if '_base_' not in c]
EXPERIMENTS = [
    c for c in ALL_CONFIGS if '_base_' not in c and c not in DENSE_CONFIGS
]
FLAGSHIP = 'configs/lvit/vit-b_gla_copy-distill_in1k.py'


@functools.cache
def _parsed(path):
    return Config.fromfile(osp.join(ROOT, path))


def load(path):
    """The resolved config (parsed once per test session; a copy, so a
    test may change it)."""
    return copy.deepcopy(_parsed(path))


def structure_key(model_cfg):
    """The model config without class counts: configs that differ only in
    their head's width build the same modules."""
    model_cfg = copy.deepcopy(model_cfg.to_dict())

    def strip(node):
        if isinstance(node, dict):
            node.pop('num_classes', None)
            node.pop('teacher_checkpoint', None)
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    strip(model_cfg)
    return repr(model_cfg)


@pytest.fixture(scope='module')
def teacher_checkpoint(tmp_path_factory):
    """checkpoint(teacher_cfg) -> path of a synthetic mmpretrain checkpoint
    of that softmax classifier (one file per distinct teacher)."""
    init_default_scope('mmpretrain')
    folder = tmp_path_factory.mktemp('teachers')
    paths = {}

    def checkpoint(teacher_cfg):
        key = repr(teacher_cfg.to_dict())
        if key not in paths:
            paths[key] = str(folder / f'teacher{len(paths)}.pth')
            model = MODELS.build(teacher_cfg)
            torch.save({'state_dict': model.state_dict()}, paths[key])
        return paths[key]

    return checkpoint


def test_every_config_parses():
    assert len(EXPERIMENTS) >= 60
    for path in ALL_CONFIGS:
        cfg = load(path)
        if path in EXPERIMENTS:
            assert 'model' in cfg and 'train_dataloader' in cfg, path


@pytest.mark.parametrize('path', EXPERIMENTS)
def test_config_heads_match_data(path):
    """The student's head and the data preprocessor agree on the classes."""
    cfg = load(path)
    model = cfg.model.get('student', cfg.model)
    assert model.head.num_classes == cfg.data_preprocessor.num_classes, path


LOG_INTERVAL = 20  # iterations; an epoch's end is logged anyway


def test_every_config_logs_progress_every_20_iterations():
    """A run never goes quiet for long: every shipped config, dense ones
    included, logs training progress at least every 20 iterations
    (mmengine's LoggerHook also logs the last iteration of every epoch)."""
    for path in EXPERIMENTS + DENSE_EXPERIMENTS:
        logger = load(path).default_hooks.logger
        assert logger.type.endswith('LoggerHook'), path
        assert logger.interval <= LOG_INTERVAL, (path, logger.interval)


def test_no_config_lists_the_mhla_clamp_hook():
    """MHLA keeps its mixing matrix in range itself: no config needs
    MHLAMixingClampHook (which now only warns)."""
    for path in glob.glob(
        osp.join(ROOT, 'configs', '**', '*.py'), recursive=True
    ):
        with open(path) as f:
            assert 'MHLAMixingClampHook' not in f.read(), path


@functools.cache
def _resolved_bases(base_paths):
    """The config the ``_base_`` files resolve to, before a leaf adds its
    own values."""
    with tempfile.TemporaryDirectory() as folder:
        path = osp.join(folder, 'bases.py')
        with open(path, 'w') as f:
            f.write(f'_base_ = {list(base_paths)!r}\n')
        return Config.fromfile(path, import_custom_modules=False).to_dict()


def _base_paths(tree, folder):
    """A config's ``_base_`` files as absolute paths."""
    for statement in tree.body:
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.targets[0], ast.Name)
            and statement.targets[0].id == '_base_'
        ):
            paths = ast.literal_eval(statement.value)
            paths = [paths] if isinstance(paths, str) else paths
            return tuple(osp.normpath(osp.join(folder, p)) for p in paths)
    return ()


def _stated_values(tree):
    """(key path, source line) of every value a config states: its
    top-level names and, inside ``dict(...)`` calls, every keyword (nested
    dict calls as deeper paths). A name with two leading underscores is not
    a key of the resolved config: it is checked where it is used."""

    def walk(node, path):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == 'dict'
            and not node.args
        ):
            for keyword in node.keywords:
                if keyword.arg not in (None, '_delete_'):
                    yield from walk(keyword.value, (*path, keyword.arg))
        else:
            yield path, node.lineno

    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name) and not (
                    target.id == '_base_' or target.id.startswith('__')
                ):
                    yield from walk(statement.value, (target.id,))


def _lookup(cfg, path):
    for key in path:
        if not isinstance(cfg, dict) or key not in cfg:
            return KeyError
        cfg = cfg[key]
    return cfg


@pytest.mark.parametrize('path', EXPERIMENTS + DENSE_EXPERIMENTS)
def test_leaves_state_only_what_differs_from_their_bases(path):
    """Every value a leaf config states differs from what its bases
    resolve to: no leaf restates a base's value."""
    full = osp.join(ROOT, path)
    with open(full) as f:
        tree = ast.parse(f.read())
    resolved = load(path).to_dict()
    base = _resolved_bases(_base_paths(tree, osp.dirname(full)))
    for key_path, line in _stated_values(tree):
        value = _lookup(resolved, key_path)
        assert value != _lookup(base, key_path), (
            f'{path}:{line} restates {".".join(key_path)} = {value!r} '
            'from its bases'
        )


def test_every_model_builds(teacher_checkpoint, tmp_path):
    init_default_scope('mmpretrain')
    built = set()
    for path in EXPERIMENTS:
        cfg = load(path)
        key = structure_key(cfg.model)
        if key in built:
            continue
        built.add(key)
        model_cfg = cfg.model
        if model_cfg.type == 'AttentionDistiller':
            model_cfg.teacher_checkpoint = teacher_checkpoint(
                model_cfg.teacher
            )
        model = MODELS.build(model_cfg)
        pretrained = model_cfg.get('backbone', {}).get('init_cfg')
        if isinstance(pretrained, dict) and pretrained.type == 'Pretrained':
            # A fine-tuning config: its student checkpoint, synthesised.
            student_file = tmp_path / 'student.pth'
            torch.save({'state_dict': model.state_dict()}, student_file)
            model.backbone.init_cfg['checkpoint'] = str(student_file)
        model.init_weights()
        assert sum(p.numel() for p in model.parameters()) > 0, path
        del model
        release_memory()
    assert len(built) >= 10


@pytest.fixture(scope='module')
def image_file(tmp_path_factory):
    """A small colour PNG for the pipelines that load from disk."""
    import numpy as np
    from PIL import Image

    path = tmp_path_factory.mktemp('img') / 'img.png'
    Image.fromarray(np.random.randint(0, 255, (40, 48, 3), np.uint8)).save(
        path
    )
    return str(path)


@pytest.mark.parametrize('path', EXPERIMENTS)
def test_pipelines_build_and_run(path, image_file):
    import numpy as np
    from PIL import Image

    cfg = load(path)
    init_default_scope('mmpretrain')
    channels = cfg.model.get('student', cfg.model).backbone.get(
        'in_channels', 3
    )
    for loader in ('train_dataloader', 'test_dataloader'):
        pipeline = [TRANSFORMS.build(t) for t in cfg[loader].dataset.pipeline]
        if pipeline and type(pipeline[0]).__name__ == 'LoadImageFromFile':
            results = dict(img_path=image_file, gt_label=1)
        else:  # datasets that hold decoded arrays (MNIST-like, CIFAR, STL)
            img = np.asarray(Image.open(image_file))
            results = dict(
                img=img[..., 0] if channels == 1 else img, gt_label=1
            )
        for transform in pipeline:
            results = transform(results)
        assert results['inputs'].shape[0] == channels, path


@pytest.fixture(scope='module')
def tiny_imagenet(tmp_path_factory):
    """Two classes, two images each, in ImageNet's folder + meta layout."""
    import numpy as np
    from PIL import Image

    data = tmp_path_factory.mktemp('tiny_imagenet')
    for split in ('train', 'val'):
        lines = []
        for label, wnid in enumerate(('n01440764', 'n01443537')):
            (data / split / wnid).mkdir(parents=True)
            for i in range(2):
                pixels = np.random.randint(0, 255, (64, 80, 3), np.uint8)
                Image.fromarray(pixels).save(data / split / wnid / f'{i}.png')
                lines.append(f'{wnid}/{i}.png {label}')
        (data / 'meta').mkdir(exist_ok=True)
        (data / 'meta' / f'{split}.txt').write_text('\n'.join(lines))
    return data


def tiny_data_options(data):
    return [
        f'{split}_dataloader.dataset.data_root={data}'
        for split in ('train', 'val', 'test')
    ] + [
        'train_dataloader.batch_size=2',
        'train_dataloader.num_workers=0',
        'val_dataloader.batch_size=2',
        'val_dataloader.num_workers=0',
        'model.student.head.num_classes=2',
        'data_preprocessor.num_classes=2',
        'val_evaluator.topk=[1]',
    ]


def train(python, work_dir, options):
    out = subprocess.run(
        [
            python,
            'tools/train.py',
            FLAGSHIP,
            '--work-dir',
            str(work_dir),
            '--cfg-options',
            *options,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return out.returncode, out.stdout + out.stderr


def test_flagship_trains_on_tiny_data(
    tmp_path, teacher_checkpoint, tiny_imagenet, python
):
    """A few iterations of the flagship recipe on a tiny image folder with
    a synthetic DeiT-B checkpoint."""
    teacher = teacher_checkpoint(load(FLAGSHIP).model.teacher)
    code, log = train(
        python,
        tmp_path,
        [
            f'model.teacher_checkpoint={teacher}',
            'train_cfg.max_epochs=1',
            'default_hooks.logger.interval=1',
            *tiny_data_options(tiny_imagenet),
        ],
    )
    assert code == 0, log[-4000:]
    assert 'Epoch(train) [1][2/2]' in log
    assert 'loss_distill' in log
    # The hook table goes to the log file of the work dir.
    (log_file,) = tmp_path.glob('*/*.log')
    assert 'SoftmaxToLinearInitHook' in log_file.read_text()
    ckpt = load_checkpoint_file(tmp_path / 'epoch_1.pth')
    assert not any(k.startswith('teacher.') for k in ckpt['state_dict'])


def test_missing_teacher_checkpoint_names_the_field(
    tmp_path, tiny_imagenet, python
):
    code, log = train(python, tmp_path, tiny_data_options(tiny_imagenet))
    assert code != 0
    assert 'model.teacher_checkpoint' in log


def test_missing_data_root_names_the_field(tmp_path, python):
    code, log = train(
        python, tmp_path, ['model.teacher_checkpoint=unused.pth']
    )
    assert code != 0
    assert "train_dataloader.dataset.data_root='data/imagenet'" in log
