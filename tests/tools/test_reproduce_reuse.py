"""``reproduce.py --reuse``: a grid's runs that other CSVs hold are copied
into its CSV (with the components their setting copies) instead of being
trained again; refused with a data subset or another teacher."""

import csv
import shutil

import pytest

from lab.reproduction.classification import cli, runner
from lab.reproduction.classification.records import RunResult
from lab.reproduction.records import read_results

FULL = (
    'patch_embed pos_embed cls_token norms attn_qkv attn_proj mlp '
    'layer_scale attn_pool final_norm'
)


def test_reuse_copies_the_grids_runs_once(repo_root, tmp_path):
    source = tmp_path / 'mnist5k.csv'
    shutil.copyfile(f'{repo_root}/results/mnist5k.csv', source)
    out = str(tmp_path / 'components.csv')
    runs = runner.grid(
        ['relu'],
        ['random', 'fullcopy', 'fullcopy-attn', 'fullcopy+distill'],
        'off',
        [50.0],
        [10],
        [0, 1],
        ['mnist-5k'],
    )
    # mnist5k.csv holds seed 0 of Random and FullCopy (also distilled), not
    # seed 1 nor the spec fullcopy-attn.
    assert runner.reuse_results([str(source)], runs, out) == 3
    assert runner.reuse_results([str(source)], runs, out) == 0
    copied = {
        (r.run.setting, r.run.distill, r.run.seed): r
        for r in read_results(out, RunResult)
    }
    assert set(copied) == {
        ('random', False, 0),
        ('fullcopy', False, 0),
        ('fullcopy', True, 0),
    }
    with open(source) as f:
        rows = {
            (row['setting'], row['distill'], row['seed']): row
            for row in csv.DictReader(f)
            if row['operator'] == 'relu'
        }
    for (setting, distill, seed), result in copied.items():
        row = rows[(setting, str(int(distill)), str(seed))]
        assert f'{result.top1:.2f}' == row['top1']
        assert result.components == ('none' if setting == 'random' else FULL)


@pytest.mark.parametrize(
    'options, message',
    [
        (['--train-indices', '64'], 'on the full data'),
        (['--teacher', 'other.pth'], 'of the shipped teacher'),
    ],
)
def test_reuse_is_refused_for_other_runs(options, message):
    args = cli.parse_args(['--reuse', 'results/mnist5k.csv', *options])
    with pytest.raises(SystemExit, match=message):
        runner.check_reusable(args)
