"""How the shipped configs are put together: no config inherits through
more than three files (leaf -> experiment base -> model / dataset /
schedule / runtime base), bases in other packages included."""

import os.path as osp

import pytest
from config_tree import longest_chain
from test_configs import ALL_CONFIGS, ROOT

LEAVES = [c for c in ALL_CONFIGS if '_base_' not in c]
MAX_DEPTH = 3


@pytest.mark.parametrize('path', LEAVES)
def test_configs_inherit_through_at_most_three_files(path):
    chain = longest_chain(osp.join(ROOT, path))
    assert len(chain) <= MAX_DEPTH, ' -> '.join(
        osp.relpath(p, ROOT) for p in chain
    )


def test_chain_follows_relative_and_package_bases(tmp_path):
    """The measure itself: relative bases are followed file by file, and
    ``mmpretrain::`` bases into the installed package's configs."""
    (tmp_path / 'a.py').write_text("_base_ = './b.py'\n")
    (tmp_path / 'b.py').write_text(
        "_base_ = ['./c.py', 'mmpretrain::_base_/default_runtime.py']\n"
    )
    (tmp_path / 'c.py').write_text("_base_ = ['./d.py']\n")
    (tmp_path / 'd.py').write_text('x = 1\n')
    chain = longest_chain(str(tmp_path / 'a.py'))
    assert [osp.basename(p) for p in chain] == ['a.py', 'b.py', 'c.py', 'd.py']
    (tmp_path / 'c.py').write_text('y = 2\n')
    longest_chain.cache_clear()
    package_chain = longest_chain(str(tmp_path / 'b.py'))
    assert len(package_chain) == 2
    assert osp.isfile(package_chain[1])
