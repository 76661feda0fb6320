"""``mim train/test/run mmlvit`` after an editable install (``pip install
-e .`` then tools/setup/link_editable_install.py, as ``make setup`` does),
run from another folder; and the link script's refusals."""

import importlib.util
import json
import os.path as osp

import pytest
from tool_runs import (
    REPO_ROOT,
    mim_env,
    one_batch_options,
    run_log,
    source_copy,
)

CONFIG = 'vit-tiny-p4_gla_copy-distill_fashion-mnist-5k.py'


def _link_module():
    path = REPO_ROOT / 'tools' / 'setup' / 'link_editable_install.py'
    spec = importlib.util.spec_from_file_location('link_editable', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mim_in_editable_install(tmp_path, python, fashion_mnist_root):
    source, site = source_copy(tmp_path / 'source'), tmp_path / 'site'
    pip = [python, '-m', 'pip', 'install', '-q', '--no-deps']
    run_log(
        pip + ['--no-build-isolation', '--target', str(site), '-e', '.'],
        source,
    )
    # setup.py links (not copies) the tree mim reads into the package.
    assert osp.islink(source / 'mmlvit' / '.mim' / 'tools')
    log = run_log(
        [python, 'tools/setup/link_editable_install.py', '--site', str(site)],
        source,
    )
    assert f'{site}/mmlvit -> {source}/mmlvit' in log
    record = next(site.glob('mmlvit-*.dist-info')) / 'RECORD'
    assert 'mmlvit,,' in record.read_text().splitlines()

    env = mim_env(site, python)
    options = one_batch_options(fashion_mnist_root)
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    work = tmp_path / 'work'
    # A config named by its file name only: mim finds it in the checkout.
    log = run_log(
        ['mim', 'train', 'mmlvit', CONFIG, '--work-dir', str(work)]
        + ['--cfg-options', *options],
        elsewhere,
        env=env,
    )
    assert f'{site}/mmlvit/.mim/tools/train.py' in log
    assert f'will use {source}/configs/fashion_mnist/{CONFIG}' in log
    assert 'Epoch(train) [2][1/1]' in log
    teacher = 'checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth'
    assert teacher in log
    log = run_log(
        ['mim', 'test', 'mmlvit', CONFIG, '--checkpoint']
        + [str(work / 'epoch_2.pth'), '--work-dir', str(work)]
        + ['--cfg-options', *options],
        elsewhere,
        env=env,
    )
    assert 'Epoch(test) [1/1]' in log and 'accuracy/top1' in log
    # The install reads the checkout itself: a tool added after the
    # install runs under `mim run`.
    (source / 'tools' / 'added_later.py').write_text(
        "print('added after the install')\n"
    )
    log = run_log(['mim', 'run', 'mmlvit', 'added_later'], elsewhere, env=env)
    assert 'added after the install' in log


def _fake_install(site, checkout, editable=True):
    """A dist-info for mmlvit in ``site`` naming ``checkout``."""
    info = site / 'mmlvit-0.1.0.dist-info'
    info.mkdir(parents=True)
    (info / 'METADATA').write_text('Name: mmlvit\nVersion: 0.1.0\n')
    (info / 'RECORD').write_text('mmlvit-0.1.0.dist-info/RECORD,,\n')
    url = dict(url=f'file://{checkout}', dir_info=dict(editable=editable))
    (info / 'direct_url.json').write_text(json.dumps(url))


def test_link_refusals(tmp_path):
    link = _link_module()
    with pytest.raises(SystemExit, match='not installed in'):
        link.link_editable_install(str(tmp_path))

    regular = tmp_path / 'regular'
    _fake_install(regular, tmp_path, editable=False)
    with pytest.raises(SystemExit, match='regular install'):
        link.link_editable_install(str(regular))

    checkout, site = tmp_path / 'checkout', tmp_path / 'site'
    (checkout / 'mmlvit').mkdir(parents=True)
    _fake_install(site, checkout)
    with pytest.raises(SystemExit, match=r'\.mim has no tools/train\.py'):
        link.link_editable_install(str(site))

    tools = checkout / 'mmlvit' / '.mim' / 'tools'
    tools.mkdir(parents=True)
    (tools / 'train.py').write_text('')
    (site / 'mmlvit').mkdir()
    with pytest.raises(SystemExit, match='is a regular package'):
        link.link_editable_install(str(site))
    (site / 'mmlvit').rmdir()
    assert link.link_editable_install(str(site)) == str(site / 'mmlvit')
    assert osp.realpath(site / 'mmlvit') == str(checkout / 'mmlvit')
