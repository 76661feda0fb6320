"""choose_hybrid.py: the written config keeps the measured worst block as
softmax attention with the teacher's weights, trains in a real Runner and
its checkpoint is evaluated by tools/test.py."""

import os
import subprocess

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner

from mmlvit.diagnostics.hybrid import config_text, hybrid_attn_cfg

CONFIG = 'tests/data/configs/tiny_gla_distill_fmnist.py'
TOOL = 'tools/analysis/choose_hybrid.py'


class CaptureInit(Hook):
    """Keeps the student's weights as training starts (after the init
    hook)."""

    priority = 'LOWEST'

    def before_train(self, runner):
        self.state = {
            k: v.clone() for k, v in runner.model.student.state_dict().items()
        }


def test_measured_hybrid_trains_and_tests(
    repo_root,
    tiny_teacher_checkpoint,
    tmp_path,
    python,
    load_tool,
    fashion_mnist_root,
):
    teacher_ckpt = tiny_teacher_checkpoint
    out = tmp_path / 'hybrid' / 'k1.py'
    blocks = load_tool(TOOL).main(
        [CONFIG, '--teacher', teacher_ckpt, '--out', str(out)]
        + ['--warmup-iters', '3', '--batches', '1', '--keep-softmax', '1']
    )
    cfg = Config.fromfile(out)
    selection = cfg.hybrid_selection
    errors = selection['errors']
    assert selection['method'] == 'measured'
    assert blocks == selection['blocks'] == [max(errors, key=errors.get)]
    assert len(errors) == 2
    (block,) = blocks
    types = [c['type'] for c in cfg.model.student.backbone.attn_cfg]
    assert types[block] == 'SoftmaxAttention'
    assert types[1 - block] == 'GatedLinearAttention'
    assert cfg.model.teacher_checkpoint == teacher_ckpt

    cfg.work_dir = str(tmp_path / 'work')
    cfg.train_cfg.max_epochs = 1
    runner = Runner.from_cfg(cfg)
    capture = CaptureInit()
    runner.register_hook(capture)
    runner.train()
    teacher = torch.load(teacher_ckpt)['state_dict']
    for name in ('qkv.weight', 'proj.weight'):
        key = f'backbone.layers.{block}.attn.{name}'
        assert torch.equal(capture.state[key], teacher[key]), key
        other = f'backbone.layers.{1 - block}.attn.{name}'
        assert not torch.equal(capture.state[other], teacher[other]), other

    test = subprocess.run(
        [python, 'tools/test.py', str(out), str(tmp_path / 'work/epoch_1.pth')]
        + ['--work-dir', str(tmp_path / 'test')],
        cwd=repo_root,
        env=dict(os.environ, OMP_NUM_THREADS='1'),
        capture_output=True,
        text=True,
    )
    assert test.returncode == 0, test.stderr[-3000:]
    assert 'accuracy/top1' in test.stdout + test.stderr


def test_fixed_blocks_and_errors(tmp_path, load_tool):
    tool = load_tool(TOOL)
    out = tmp_path / 'last.py'
    assert tool.main([CONFIG, '--blocks', '1', '--out', str(out)]) == [1]
    assert Config.fromfile(out).hybrid_selection == dict(
        method='given', blocks=[1]
    )
    with pytest.raises(ValueError, match=r'Blocks \[2\] do not exist'):
        tool.main([CONFIG, '--blocks', '2', '--out', str(out)])
    with pytest.raises(ValueError, match='distillation config'):
        tool.main(
            ['tests/data/configs/tiny_softmax_fmnist.py', '--blocks', '0']
            + ['--out', str(out)]
        )


def test_attn_cfg_list_and_config_text():
    gla = dict(type='GatedLinearAttention', chunk_size=16)
    assert hybrid_attn_cfg(gla, 3, [2]) == [
        gla,
        gla,
        dict(type='SoftmaxAttention'),
    ]
    text = config_text(dict(a=[dict(type='X')], errors={0: 0.5}))
    assert eval(text) == dict(a=[dict(type='X')], errors={0: 0.5})
