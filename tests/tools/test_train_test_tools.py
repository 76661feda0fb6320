"""tools/train.py, --resume, tools/test.py, load_from, mim and DDP, run
as a user runs them (subprocesses) on a Fashion-MNIST subset."""

import glob
import json
import os
import os.path as osp

import pytest
import torch
from tool_runs import (
    launch,
    mim_env,
    one_batch_options,
    resume_in_copy,
    run,
    run_log,
    source_copy,
)

from mmlvit.checkpoint import load_checkpoint_file

TINY = 'tests/data/configs/tiny_softmax_fmnist.py'


@pytest.fixture(scope='module')
def trained(tmp_path_factory, repo_root, python, fashion_mnist_root):
    """Two epochs of the tiny config through tools/train.py."""
    work_dir = tmp_path_factory.mktemp('train')
    # One thread, as each process of the two-process run: the same order of
    # float sums, so the runs compare at a tight tolerance.
    log = run_log(
        [python, 'tools/train.py', TINY, '--work-dir', str(work_dir)],
        repo_root,
        env=dict(os.environ, OMP_NUM_THREADS='1'),
    )
    return work_dir, log


def test_train_writes_checkpoints(trained):
    work_dir, log = trained
    assert 'Epoch(train) [2][4/4]' in log
    assert 'eta:' in log
    ckpt = load_checkpoint_file(work_dir / 'epoch_2.pth')
    assert any(
        k.startswith('backbone.layers.1.attn.qkv') for k in ckpt['state_dict']
    )
    assert ckpt['meta']['epoch'] == 2


def test_resume_continues(trained, tmp_path, repo_root, python):
    work_dir, _ = trained
    resumed = tmp_path / 'resumed'
    log = resume_in_copy(
        python, TINY, work_dir, resumed, repo_root, 'train_cfg.max_epochs=3'
    )
    assert 'resumed epoch: 2, iter: 8' in log
    assert 'Epoch(train) [3][4/4]' in log
    assert 'Epoch(train) [1]' not in log
    ckpt = load_checkpoint_file(resumed / 'epoch_3.pth')
    assert ckpt['meta']['iter'] == 12


def test_test_tool_evaluates(trained, tmp_path, repo_root, python):
    work_dir, log = trained
    out_file = tmp_path / 'metrics.json'
    test_log = run_log(
        [
            python,
            'tools/test.py',
            TINY,
            str(work_dir / 'epoch_2.pth'),
            '--work-dir',
            str(tmp_path),
            '--out',
            str(out_file),
        ],
        repo_root,
    )
    metrics = json.loads(out_file.read_text())
    assert 0 <= metrics['accuracy/top1'] <= 100
    # The same checkpoint validated during training gave the same accuracy.
    assert f'accuracy/top1: {metrics["accuracy/top1"]:.4f}' in log
    assert 'Epoch(test)' in test_log


def test_load_from(trained, tmp_path, repo_root, python):
    work_dir, _ = trained
    log = run_log(
        [
            python,
            'tools/train.py',
            TINY,
            '--work-dir',
            str(tmp_path),
            '--cfg-options',
            f'load_from={work_dir}/epoch_2.pth',
        ],
        repo_root,
    )
    assert f'Load checkpoint from {work_dir}/epoch_2.pth' in log
    assert 'Epoch(train) [2][4/4]' in log


def test_corrupt_resume_checkpoint_is_named(
    trained, tmp_path, repo_root, python
):
    work_dir, _ = trained
    bad = tmp_path / 'bad.pth'
    data = (work_dir / 'epoch_2.pth').read_bytes()
    bad.write_bytes(data[: len(data) // 3])
    out = run(
        [python, 'tools/train.py', TINY, '--work-dir', str(tmp_path)]
        + ['--resume', str(bad)],
        repo_root,
    )
    assert out.returncode != 0
    assert f'Cannot read checkpoint {bad}' in out.stderr


def _single_batch_loss(config, checkpoint, repo_root):
    """Training loss of a checkpoint on the first 32 training images."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmengine.runner import load_checkpoint
    from mmpretrain.registry import DATASETS, MODELS

    init_default_scope('mmpretrain')
    cfg = Config.fromfile(osp.join(repo_root, config))
    model = MODELS.build(cfg.model)
    load_checkpoint(model, str(checkpoint), map_location='cpu')
    dataset_cfg = cfg.train_dataloader.dataset
    dataset_cfg.data_root = osp.join(repo_root, dataset_cfg.data_root)
    dataset = DATASETS.build(dataset_cfg)
    batch = model.data_preprocessor(
        dict(
            inputs=[dataset[i]['inputs'] for i in range(32)],
            data_samples=[dataset[i]['data_samples'] for i in range(32)],
        ),
        training=True,
    )
    model.eval()
    with torch.no_grad():
        return model(**batch, mode='loss')['loss'].item()


def test_dist_train_two_processes_match_one(
    trained, tmp_path, repo_root, python
):
    """2 gloo processes x batch 16 == 1 process x batch 32, step for step."""
    work_dir, _ = trained
    log = launch(
        'tools/dist_train.sh',
        [
            TINY,
            '2',
            '--work-dir',
            str(tmp_path),
            '--cfg-options',
            'train_dataloader.batch_size=16',
        ],
        repo_root,
        python,
    )
    assert 'Distributed launcher: pytorch' in log
    assert 'Distributed training: True' in log
    # 128 images, 16 per process: 4 iterations an epoch only with 2 ranks.
    assert 'Epoch(train) [2][4/4]' in log
    dist_ckpt = load_checkpoint_file(tmp_path / 'epoch_2.pth')
    one_ckpt = load_checkpoint_file(work_dir / 'epoch_2.pth')
    assert dist_ckpt['meta']['iter'] == one_ckpt['meta']['iter'] == 8
    for key, value in one_ckpt['state_dict'].items():
        torch.testing.assert_close(
            dist_ckpt['state_dict'][key], value, rtol=1e-4, atol=1e-5, msg=key
        )
    loss_dist = _single_batch_loss(TINY, tmp_path / 'epoch_2.pth', repo_root)
    loss_one = _single_batch_loss(TINY, work_dir / 'epoch_2.pth', repo_root)
    assert abs(loss_dist - loss_one) < 1e-4


def test_mim_train_non_editable_install(
    tmp_path, repo_root, python, fashion_mnist_root
):
    """`mim train mmlvit CONFIG` from a wheel installed into a folder."""
    wheel_dir, site = tmp_path / 'wheel', tmp_path / 'site'
    source = source_copy(tmp_path / 'source')
    run_log(
        [
            python,
            '-m',
            'pip',
            'wheel',
            '-q',
            '--no-deps',
            '--no-build-isolation',
            '.',
            '-w',
            str(wheel_dir),
        ],
        source,
    )
    wheel = glob.glob(str(wheel_dir / 'mmlvit-*.whl'))[0]
    run_log(
        [
            python,
            '-m',
            'pip',
            'install',
            '-q',
            '--no-deps',
            '--target',
            str(site),
            wheel,
        ],
        repo_root,
    )
    assert (site / 'mmlvit' / '.mim' / 'tools' / 'train.py').is_file()
    env = mim_env(site, python)
    # Two iterations of one batch, data from the checkout.
    options = one_batch_options(fashion_mnist_root)

    def mim_train(config, work_dir):
        return run_log(
            ['mim', 'train', 'mmlvit', str(config), '--work-dir']
            + [str(work_dir), '--cfg-options', *options],
            tmp_path,
            env=env,
        )

    log = mim_train(osp.join(repo_root, TINY), tmp_path / 'work')
    assert f'{site}/mmlvit/.mim/tools/train.py' in log
    assert 'Epoch(train) [2][1/1]' in log
    assert (tmp_path / 'work' / 'epoch_2.pth').is_file()
    # The installed package's own distillation config: its teacher is the
    # package's shipped checkpoint.
    shipped = site / 'mmlvit' / '.mim'
    config = 'fashion_mnist/vit-tiny-p4_gla_copy-distill_fashion-mnist-5k.py'
    log = mim_train(shipped / 'configs' / config, tmp_path / 'distill')
    teacher = shipped / 'checkpoints' / 'vit-tiny-p4_softmax_fashion-mnist.pth'
    assert str(teacher) in log
    assert 'Epoch(train) [2][1/1]' in log
    assert (tmp_path / 'distill' / 'epoch_2.pth').is_file()
