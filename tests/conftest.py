"""Fixtures shared by the whole suite."""

import os.path as osp
import sys

import pytest

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
