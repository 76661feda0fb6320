"""A trained student as safetensors + JSON, rebuilt without config files."""

import json

import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS

from mmlvit.deployment import export_portable, load_classifier, load_portable

DISTILL = 'tests/data/configs/tiny_gla_distill_fmnist.py'


def trained_student(repo_root, tmp_path):
    """The distiller config's student with weights no init gives, saved as
    training saves it."""
    cfg = Config.fromfile(f'{repo_root}/{DISTILL}')
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    student = MODELS.build(cfg.model.student)
    with torch.no_grad():
        for param in student.parameters():
            param.add_(0.1 * torch.randn_like(param))
    path = tmp_path / 'epoch_1.pth'
    torch.save(dict(state_dict=student.state_dict()), path)
    return student.eval(), path


def test_round_trip_gives_identical_logits(repo_root, tmp_path):
    _, ckpt = trained_student(repo_root, tmp_path)
    # The reference: the classifier the config and checkpoint give.
    student, _ = load_classifier(f'{repo_root}/{DISTILL}', str(ckpt))
    weights, config = export_portable(
        f'{repo_root}/{DISTILL}', str(ckpt), str(tmp_path / 'out' / 'gla')
    )
    record = json.loads(open(config).read())
    assert record['model']['type'] == 'ImageClassifier'
    assert record['model']['backbone']['attn_cfg'] == dict(
        type='GatedLinearAttention'
    )
    assert 'teacher' not in json.dumps(record)
    for path in (config, weights, str(tmp_path / 'out' / 'gla')):
        rebuilt = load_portable(path).classifier
        images = torch.rand(3, 1, 28, 28) * 255
        with torch.no_grad():
            assert torch.equal(
                rebuilt(images, mode='tensor'), student(images, mode='tensor')
            )
            # The data preprocessor (normalisation) travels too.
            data = rebuilt.data_preprocessor(dict(inputs=list(images)))
            ref = student.data_preprocessor(dict(inputs=list(images)))
            assert torch.equal(data['inputs'], ref['inputs'])


def test_export_tool(repo_root, tmp_path, load_tool, capsys):
    _, ckpt = trained_student(repo_root, tmp_path)
    load_tool('tools/deployment/export_safetensors.py').main(
        [f'{repo_root}/{DISTILL}', str(ckpt), '--out', str(tmp_path / 's')]
    )
    out = capsys.readouterr().out
    assert 'max abs difference of the logits 0' in out
    assert (tmp_path / 's.safetensors').is_file()
