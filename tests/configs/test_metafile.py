"""configs/lvit/metafile.yml, the model index mim reads: one entry per
config of configs/lvit, each with the fields of OpenMMLab's model-index
format, naming a config that loads, whose model types are registered and
whose epochs are the config's."""

import glob
import os.path as osp

import pytest
import yaml
from mmpretrain.registry import MODELS
from test_configs import ROOT, load

METAFILE = osp.join(ROOT, 'configs', 'lvit', 'metafile.yml')
FIELDS = {
    'Name',
    'In Collection',
    'Config',
    'Metadata',
    'Results',
    'Weights',
}


def metafile():
    with open(METAFILE) as f:
        return yaml.safe_load(f)


ENTRIES = metafile()['Models']


def test_model_index_imports_the_metafile():
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        index = yaml.safe_load(f)
    assert index['Import'] == ['configs/lvit/metafile.yml']


def test_every_lvit_config_has_one_entry():
    configs = sorted(
        osp.relpath(p, ROOT)
        for p in glob.glob(osp.join(ROOT, 'configs', 'lvit', '*.py'))
    )
    assert sorted(entry['Config'] for entry in ENTRIES) == configs
    for entry in ENTRIES:
        assert entry['Name'] == osp.basename(entry['Config'])[: -len('.py')]


@pytest.mark.parametrize('entry', ENTRIES, ids=lambda e: e['Name'])
def test_entry_has_the_model_index_fields(entry):
    assert set(entry) == FIELDS, entry['Name']
    collections = {c['Name'] for c in metafile()['Collections']}
    assert entry['In Collection'] in collections
    assert set(entry['Metadata']) >= {'Epochs', 'Batch Size', 'Training Data'}
    assert isinstance(entry['Results'], list)
    for result in entry['Results']:
        assert set(result) >= {'Task', 'Dataset', 'Metrics'}
    # No trained weights are released; a real release would give a URL.
    weights = entry['Weights']
    assert weights is None or weights.startswith('https://'), weights


@pytest.mark.parametrize('entry', ENTRIES, ids=lambda e: e['Name'])
def test_entry_names_a_config_that_loads_with_registered_models(entry):
    cfg = load(entry['Config'])
    assert cfg.train_cfg.max_epochs == entry['Metadata']['Epochs']
    model = cfg.model
    assert MODELS.get(model.type) is not None, model.type
    classifiers = (
        [model.student, model.teacher] if 'student' in model else [model]
    )
    for classifier in classifiers:
        assert MODELS.get(classifier.type) is not None, classifier.type
        assert MODELS.get(classifier.backbone.type) is not None
