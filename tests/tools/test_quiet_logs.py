"""What a person reads: a tiny distilled run through tools/train.py prints
progress and almost no warnings; tools/init_student.py prints its copy
table, not mmengine's per-tensor init dump."""

import logging
import os
import re
import subprocess

import pytest
import torch

from mmlvit.utils.logs import hide_frozen_teacher_notes

DISTILL = 'tests/data/configs/tiny_gla_distill_fmnist.py'
MAX_WARNING_LINES = 5


def run(cmd, cwd):
    out = subprocess.run(
        cmd,
        cwd=cwd,
        env=dict(os.environ, OMP_NUM_THREADS='1'),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout + out.stderr


def warning_lines(text):
    return [
        line
        for line in text.splitlines()
        if re.search(r'\bWARNING\b|Warning\b', line)
    ]


@pytest.fixture(scope='module')
def distilled_run(
    tmp_path_factory,
    repo_root,
    python,
    fashion_mnist_root,
    tiny_teacher_checkpoint,
):
    """Two epochs of the tiny GLA student distilled from its teacher: the
    console output and the work dir."""
    work_dir = tmp_path_factory.mktemp('distill')
    log = run(
        [
            python,
            'tools/train.py',
            DISTILL,
            '--work-dir',
            str(work_dir),
            '--cfg-options',
            f'model.teacher_checkpoint={tiny_teacher_checkpoint}',
        ],
        repo_root,
    )
    return log, work_dir


@pytest.fixture(scope='module')
def distilled_log(distilled_run):
    return distilled_run[0]


def test_first_progress_line_comes_early_details_go_to_the_file(
    distilled_run,
):
    """The environment block, the full config, the hook table and the
    per-parameter optimizer options (about 380 lines) go to the log file in
    the work dir; the console reaches its first progress line within 40
    lines."""
    log, work_dir = distilled_run
    lines = log.splitlines()
    first = next(i for i, line in enumerate(lines) if 'Epoch(train)' in line)
    assert first < 40, '\n'.join(lines[:first])
    (log_file,) = work_dir.glob('*/*.log')
    details = log_file.read_text()
    for detail in (
        'System environment:',
        'Config:',
        'Hooks will be executed in the following order',
        'paramwise_options -- ',
    ):
        assert detail in details, detail
        assert detail not in log, detail
    assert 'not writable' not in log  # mmpretrain's MNIST reader


def test_distilled_run_prints_progress_and_few_warnings(distilled_log):
    assert 'Epoch(train) [2][4/4]' in distilled_log
    warnings = warning_lines(distilled_log)
    assert len(warnings) <= MAX_WARNING_LINES, '\n'.join(warnings)
    for noise in (
        'is skipped since its requires_grad=False',  # 32 teacher tensors
        '"FileClient" will be deprecated',
        '"HardDiskBackend" is the alias',
        'pkg_resources is deprecated',
    ):
        assert noise not in distilled_log, noise


@pytest.mark.skipif(torch.cuda.is_available(), reason='a CUDA machine')
def test_cpu_run_counts_processes_not_gpus(distilled_log):
    assert 'Processes: 1 (CPU, no CUDA GPU)' in distilled_log
    assert 'GPU number' not in distilled_log


def test_only_the_teachers_frozen_parameters_go_unreported():
    """A frozen student parameter is still reported."""
    logger = logging.getLogger('mmlvit-test-frozen-notes')
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    hide_frozen_teacher_notes('teacher.', logger=logger)
    hide_frozen_teacher_notes('teacher.', logger=logger)  # one filter
    assert len(logger.filters) == 1
    for name in ('teacher.backbone.pos_embed', 'student.backbone.pos_embed'):
        logger.warning(f'{name} is skipped since its requires_grad=False')
    logger.warning('teacher.x is something else')
    assert [r.getMessage() for r in records] == [
        'student.backbone.pos_embed is skipped since its requires_grad=False',
        'teacher.x is something else',
    ]


def test_init_student_prints_its_table_not_the_init_dump(
    tmp_path, repo_root, python, tiny_teacher_checkpoint
):
    out = run(
        [
            python,
            'tools/init_student.py',
            DISTILL,
            tiny_teacher_checkpoint,
            '--out',
            str(tmp_path / 'student.pth'),
            '--cfg-options',
            f'model.teacher_checkpoint={tiny_teacher_checkpoint}',
        ],
        repo_root,
    )
    assert 'Softmax-to-linear init: setting=MLPCopy' in out
    assert 'calling `init_weights`' not in out
    assert len(out.splitlines()) < 60, out
