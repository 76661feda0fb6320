"""The recipe study: its arms' configs, the epochs' split between stages,
the verdicts, and the tool end to end through real Runners on a few
images (staged, hybrid and TTT arms; resume from the CSV; the report)."""

import csv
import subprocess
from types import SimpleNamespace

import pytest

from lab.reproduction.classification.recipe_report import verdict
from lab.reproduction.classification.recipes import (
    ARMS,
    arm_config,
    split_epochs,
    stage_text,
)


@pytest.mark.parametrize(
    'epochs, shares, split',
    [
        (10, (2, 3), [4, 6]),
        (10, (3, 3, 4), [3, 3, 4]),
        (7, (2, 3), [3, 4]),
        (3, (1, 1, 8), [1, 1, 1]),
        (5, (1,), [5]),
    ],
)
def test_split_epochs_adds_up_and_keeps_one_epoch_per_stage(
    epochs, shares, split
):
    assert split_epochs(epochs, shares) == split


def test_split_epochs_refuses_fewer_epochs_than_stages():
    with pytest.raises(ValueError, match='2 epochs cannot hold 3 stages'):
        split_epochs(2, (1, 1, 1))


def stages_of(cfg):
    hooks = [
        h for h in cfg.custom_hooks if h['type'] == 'ConversionStagesHook'
    ]
    return hooks[0]['stages'] if hooks else None


@pytest.mark.parametrize('name', list(ARMS))
def test_every_arm_trains_the_same_epochs_from_the_paper_recipe(
    name, tmp_path
):
    arm = ARMS[name]
    cfg = arm_config(arm, 'relu', 10, 0, 'teacher.pth', str(tmp_path))
    assert cfg.train_cfg['max_epochs'] == 10
    losses = [loss['type'] for loss in cfg.model.distill_losses]
    assert losses[0] == 'AttentionOutputMSE'
    assert cfg.model.distill_losses[0]['loss_weight'] == 50.0
    assert losses[1:] == [loss['type'] for loss in arm.losses]
    init = [
        h for h in cfg.custom_hooks if h['type'] == 'SoftmaxToLinearInitHook'
    ]
    assert init[0]['setting'] == {'mlpcopy': 'MLPCopy'}.get(
        arm.setting, 'TTTFullCopy'
    )
    stages = stages_of(cfg)
    if arm.stages:
        assert sum(s['epochs'] for s in stages) == 10
        assert stage_text(cfg) == '+'.join(str(s['epochs']) for s in stages)
    else:
        assert stages is None and stage_text(cfg) == '10'
    assert cfg.model.get('adapters') == arm.adapters
    expected = arm.operator or 'relu'
    attn = cfg.model.student.backbone.attn_cfg['type']
    assert attn.lower().startswith(expected)


def test_staged_arms_split_ten_epochs_as_documented(tmp_path):
    split = {
        name: stage_text(
            arm_config(arm, 'relu', 10, 0, 'teacher.pth', str(tmp_path))
        )
        for name, arm in ARMS.items()
    }
    assert split['logit-kd'] == '4+6'
    assert split['features'] == '3+3+4'
    assert split['lora'] == split['kd-stage'] == '4+6'
    assert split['feature-stage'] == '3+3+4'


def cell(mean, std, n=3):
    return SimpleNamespace(mean=mean, std=std, n=n)


def test_verdict_in_pooled_standard_deviations():
    assert verdict(cell(80.0, 1.0), cell(77.0, 1.0)) == (
        '+3.00 (+3.00 std)',
        'better',
    )
    assert verdict(cell(76.0, 0.3), cell(77.0, 0.4))[1] == 'worse'
    assert verdict(cell(77.5, 1.0), cell(77.0, 1.0))[1] == (
        'no clear difference'
    )
    assert verdict(cell(77.0, 0.0), cell(77.0, 0.0))[1] == (
        'no spread to judge by'
    )
    assert verdict(cell(77.0, 1.0), None) == ('-', 'baseline')


def test_recipe_study_end_to_end(
    tmp_path, repo_root, python, fashion_mnist_root
):
    out = tmp_path / 'recipes.csv'
    cmd = [
        python,
        'tools/analysis/recipe_study.py',
        '--arms',
        'features',
        'kl-hybrid',
        'ttt-fullcopy',
        '--seeds',
        '0',
        '--epochs',
        '3',
        '--warmup-iters',
        '2',
        '--train-indices',
        '64',
        '--test-indices',
        '32',
        '--out',
        str(out),
        '--work-root',
        str(tmp_path / 'work'),
        '--jobs',
        '2',
    ]
    first = subprocess.run(
        cmd, cwd=repo_root, capture_output=True, text=True, timeout=900
    )
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    with open(out) as f:
        rows = {r['arm']: r for r in csv.DictReader(f)}
    assert set(rows) == {'features', 'kl-hybrid', 'ttt-fullcopy'}
    assert rows['features']['stages'] == '1+1+1'
    assert rows['ttt-fullcopy']['operator'] == 'ttt'
    assert len(rows['kl-hybrid']['softmax_blocks'].split()) == 1
    assert len(rows['kl-hybrid']['block_scores'].split()) == 4  # each block
    for row in rows.values():
        assert 0.0 <= float(row['top1']) <= 100.0
        assert float(row['peak_rss_mib']) > 100  # a whole torch process
    table = (tmp_path / 'recipes.md').read_text()
    assert '| features | relu | 1+1+1 |' in table
    # Neither arm's reference ran.
    assert table.count('reference not run') == 3
    assert (tmp_path / 'recipes.png').stat().st_size > 0
    again = subprocess.run(
        cmd, cwd=repo_root, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert '0 runs to train (3 in' in again.stdout
