"""Fixtures shared by the whole suite."""

import importlib.util
import os
import os.path as osp
import sys

import pytest
import torch
from process_memory import release_memory

REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
FASHION_MNIST = osp.join(REPO_ROOT, 'data', 'fashion_mnist')


@pytest.fixture(scope='session')
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope='session')
def python():
    """The interpreter running the tests (the project's virtualenv)."""
    return sys.executable


@pytest.fixture(scope='session')
def fashion_mnist_root():
    """Extracted Fashion-MNIST (``make setup`` prepares it)."""
    if not osp.isfile(osp.join(FASHION_MNIST, 't10k-labels-idx1-ubyte')):
        pytest.fail(
            'Fashion-MNIST is not prepared: run `make setup` (or '
            'python tools/data/prepare_fashion_mnist.py).'
        )
    return FASHION_MNIST


@pytest.fixture(scope='module')
def one_thread():
    """One intra-op thread for a module's tests: on a shared 2-core
    machine, OpenMP barriers waiting for a preempted second thread make
    small CPU ops up to 10x slower (``usefixtures('one_thread')``)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope='session')
def load_tool():
    """Import a script under tools/ as a module (``load_tool(PATH)``)."""

    def load(path):
        name = osp.splitext(osp.basename(path))[0]
        spec = importlib.util.spec_from_file_location(
            name, osp.join(REPO_ROOT, path)
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(scope='session')
def tiny_teacher_checkpoint(tmp_path_factory):
    """The softmax teacher of tests/data/configs/tiny_gla_distill_fmnist.py
    (seed 0, PyTorch's default Linear init: attention outputs of a trained
    ViT's scale), saved in mmpretrain's format."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    init_default_scope('mmpretrain')
    cfg = Config.fromfile(
        osp.join(REPO_ROOT, 'tests/data/configs/tiny_gla_distill_fmnist.py')
    )
    torch.manual_seed(0)
    teacher = MODELS.build(cfg.model.teacher)
    path = tmp_path_factory.mktemp('tiny_teacher') / 'teacher.pth'
    torch.save(dict(state_dict=teacher.state_dict()), path)
    return str(path)


@pytest.fixture(scope='module', autouse=True)
def default_scope_as_the_session_began():
    """Every test module starts with mmengine's default scope as it was
    when the session began. A Runner or ``init_default_scope`` in one
    module (the dense tests leave 'mmdet') would otherwise decide which
    registry another module's unscoped builds search, so that module's
    results would depend on the modules run before it in its process."""
    from mmengine.registry import DefaultScope

    instances = DefaultScope._instance_dict.copy()
    yield
    DefaultScope._instance_dict.clear()
    DefaultScope._instance_dict.update(instances)


@pytest.fixture(autouse=True)
def free_built_models():
    """Models left by a test are freed before the next one starts
    (tests/process_memory.py says why they would not be)."""
    yield
    release_memory()


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` are skipped on machines without a CUDA GPU."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason='needs a CUDA GPU')
    for item in items:
        if 'cuda' in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def keep_threads():
    """For tools whose main() changes to the repository and sets torch's
    thread count: restore this process's."""
    cwd, threads = os.getcwd(), torch.get_num_threads()
    yield
    os.chdir(cwd)
    torch.set_num_threads(threads)
