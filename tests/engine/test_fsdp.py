"""FSDP as README describes it (runner_type='FlexibleRunner',
strategy=dict(type='FSDPStrategy')): train, resume and evaluate with two
gloo processes on the CPU, through the launcher scripts, with the safe
checkpoint loader on."""

import json
import os
import re
import shutil
import zipfile

import pytest
from mmengine.config import Config
from tool_runs import launch, run

from mmlvit.engine.runners.fsdp import check_sharded_checkpoint

FSDP = 'tests/data/configs/tiny_softmax_fsdp.py'
TINY = 'tests/data/configs/tiny_softmax_fmnist.py'


def resume_for_epoch_3(work_dir, repo_root, python, *path):
    """``tools/dist_train.sh FSDP 2 --resume [PATH]`` with
    ``train_cfg.max_epochs=3``."""
    return launch(
        'tools/dist_train.sh',
        [FSDP, '2', '--work-dir', str(work_dir), '--resume', *path]
        + ['--cfg-options', 'train_cfg.max_epochs=3'],
        repo_root,
        python,
    )


@pytest.fixture(scope='module')
def fsdp_run(tmp_path_factory, repo_root, python, fashion_mnist_root):
    """Two epochs of the tiny config with FSDP on 2 processes."""
    work_dir = tmp_path_factory.mktemp('fsdp')
    log = launch(
        'tools/dist_train.sh',
        [FSDP, '2', '--work-dir', str(work_dir)],
        repo_root,
        python,
    )
    return work_dir, log


def test_fsdp_trains_on_cpu_with_readme_config(fsdp_run):
    work_dir, log = fsdp_run
    # 128 images, batch 32 per process: 2 iterations an epoch on 2 ranks.
    assert 'Epoch(train) [2][2/2]' in log
    for rank in (0, 1):
        assert (work_dir / 'epoch_2.pth' / f'rank{rank}.pth').is_file()


def test_fsdp_folders_are_written_whole(fsdp_run):
    """Each folder gets its completion marker once every shard is written;
    no hidden folder of the writes is left."""
    work_dir, _ = fsdp_run
    for name in ('epoch_1.pth', 'epoch_2.pth'):
        marker = work_dir / name / 'complete.json'
        assert json.loads(marker.read_text()) == {'shards': 2}
    assert not list(work_dir.glob('.*'))


def test_auto_resume_skips_unfinished_fsdp_folders(
    fsdp_run, tmp_path, repo_root, python
):
    """--resume without a path: a newer folder without completion marker
    and one with a truncated shard are skipped with a warning naming them,
    epoch_2.pth is resumed and the damaged epoch_3.pth is replaced whole.
    The hidden folder of a killed write is removed; a complete one whose
    final name is missing (a kill between the renames of a replacement) is
    put back."""
    work_dir, _ = fsdp_run
    resumed = tmp_path / 'resumed'
    shutil.copytree(work_dir, resumed)
    unfinished = resumed / 'epoch_4.pth'
    shutil.copytree(resumed / 'epoch_2.pth', unfinished)
    (unfinished / 'complete.json').unlink()
    truncated = resumed / 'epoch_3.pth'
    shutil.copytree(resumed / 'epoch_2.pth', truncated)
    shard = truncated / 'rank1.pth'
    shard.write_bytes(shard.read_bytes()[:1000])
    killed_write = resumed / '.epoch_2.pth.sharded.tmp'
    shutil.copytree(unfinished, killed_write)
    moved_away = resumed / '.epoch_1.pth.replaced.tmp'
    (resumed / 'epoch_1.pth').rename(moved_away)
    log = resume_for_epoch_3(resumed, repo_root, python)
    assert f'Removed {killed_write}: a checkpoint folder write' in log
    assert f'Restored {resumed}/epoch_1.pth from {moved_away}' in log
    assert (
        f'Resuming from {resumed}/epoch_2.pth; skipped newer checkpoints '
        f'that cannot be resumed: {unfinished} (no complete.json: its write '
        'did not finish, or it was written without completion marker); '
        f'{truncated} (1 of 2 shards are missing or truncated: rank1.pth)'
    ) in log
    assert 'resumed epoch: 2, iter: 4' in log
    assert 'Epoch(train) [3][2/2]' in log
    assert json.loads((truncated / 'complete.json').read_text()) == {
        'shards': 2
    }
    assert zipfile.is_zipfile(shard)
    assert not list(resumed.glob('.*.tmp'))


def test_fsdp_resumes_its_sharded_checkpoint(
    fsdp_run, tmp_path, repo_root, python
):
    work_dir, _ = fsdp_run
    resumed = tmp_path / 'resumed'
    shutil.copytree(work_dir, resumed)
    log = resume_for_epoch_3(
        resumed, repo_root, python, str(resumed / 'epoch_2.pth')
    )
    assert f'Load checkpoint from {resumed}/epoch_2.pth/rank0.pth' in log
    assert 'resumed epoch: 2, iter: 4' in log
    assert 'Epoch(train) [3][2/2]' in log
    assert 'Epoch(train) [2]' not in log


def test_fsdp_checkpoint_evaluates_with_dist_test(
    fsdp_run, tmp_path, repo_root, python
):
    work_dir, train_log = fsdp_run
    log = launch(
        'tools/dist_test.sh',
        [
            FSDP,
            str(work_dir / 'epoch_2.pth'),
            '2',
            '--work-dir',
            str(tmp_path),
        ],
        repo_root,
        python,
    )
    top1 = re.findall(r'Epoch\(test\).*accuracy/top1: ([\d.]+)', log)
    validated = re.findall(
        r'Epoch\(val\) \[2\].*accuracy/top1: ([\d.]+)', train_log
    )
    assert top1 and top1 == validated


def test_single_process_test_of_sharded_folder_names_the_fix(
    fsdp_run, tmp_path, repo_root, python
):
    work_dir, _ = fsdp_run
    folder = work_dir / 'epoch_2.pth'
    out = run(
        [python, 'tools/test.py', TINY, str(folder), '--work-dir', tmp_path],
        repo_root,
        timeout=300,
    )
    assert out.returncode != 0
    assert (
        f'ValueError: {folder} is a sharded FSDP checkpoint (one file per '
        'process, rank0.pth to rank1.pth), but the config does not use the '
        'FSDP strategy. Read it with the config that wrote it (runner_type='
        "'FlexibleRunner', strategy=dict(type='FSDPStrategy')) and as many "
        f'processes as shards, e.g. bash tools/dist_test.sh CONFIG {folder} 2.'
    ) in out.stderr
    # The FSDP config in one process is refused the same way.
    cfg = Config.fromfile(os.path.join(repo_root, FSDP))
    cfg.launcher = 'none'
    with pytest.raises(ValueError, match='but this run has 1 process'):
        check_sharded_checkpoint(cfg, str(folder))
