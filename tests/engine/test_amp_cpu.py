"""--amp on a machine without GPU: tools/train.py and tools/test.py both
autocast to bfloat16 on the CPU (mmengine's AmpOptimWrapper stops there
with a bare AssertionError)."""

import math

import pytest
import torch
from mmengine.hooks import Hook
from mmengine.registry import init_default_scope
from mmpretrain.registry import OPTIM_WRAPPERS

from mmlvit.engine.optimizers.mixed_precision import amp_device_available
from mmlvit.engine.runners.runner import build_runner

TINY = 'tests/data/configs/tiny_softmax_fmnist.py'

pytestmark = pytest.mark.skipif(
    amp_device_available(), reason='checks the CPU form of --amp'
)


class LinearDtypes(Hook):
    """The dtype of the first Linear layer's output in every forward."""

    def __init__(self):
        self.dtypes = []
        self.losses = []

    def before_run(self, runner):
        model = runner.model
        linear = next(
            m for m in model.modules() if isinstance(m, torch.nn.Linear)
        )
        linear.register_forward_hook(
            lambda m, i, out: self.dtypes.append(out.dtype)
        )

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        self.losses.append(float(outputs['loss']))


def tool_runner(load_tool, repo_root, tool, argv, work_dir):
    module = load_tool(f'tools/{tool}.py')
    args = module.parse_args(argv + ['--work-dir', str(work_dir)])
    cfg = module.merge_args(module.read_config(f'{repo_root}/{TINY}'), args)
    return build_runner(cfg)


def test_train_and_test_amp_autocast_to_bfloat16_on_cpu(
    tmp_path, repo_root, load_tool, fashion_mnist_root, monkeypatch
):
    monkeypatch.chdir(repo_root)
    runner = tool_runner(
        load_tool, repo_root, 'train', [TINY, '--amp'], tmp_path
    )
    seen = LinearDtypes()
    runner.register_hook(seen)
    runner.train()
    assert (
        type(runner.optim_wrapper).__name__ == 'SkipNonFiniteAmpOptimWrapper'
    )
    assert not runner.optim_wrapper.loss_scaler.is_enabled()
    assert set(seen.dtypes) == {torch.bfloat16}
    assert len(seen.losses) == 8 and all(map(math.isfinite, seen.losses))

    checkpoint = str(tmp_path / 'epoch_2.pth')
    tester = tool_runner(
        load_tool, repo_root, 'test', [TINY, checkpoint, '--amp'], tmp_path
    )
    seen = LinearDtypes()
    tester.register_hook(seen)
    metrics = tester.test()
    assert set(seen.dtypes) == {torch.bfloat16}
    assert 0 <= metrics['accuracy/top1'] <= 100


def test_float16_on_cpu_is_refused_with_the_fix(repo_root):
    init_default_scope('mmpretrain')
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="set it to 'bfloat16'"):
        OPTIM_WRAPPERS.build(
            dict(
                type='MixedPrecisionOptimWrapper',
                optimizer=optimizer,
                dtype='float16',
            )
        )
    built = OPTIM_WRAPPERS.build(
        dict(type='MixedPrecisionOptimWrapper', optimizer=optimizer)
    )
    assert built.cast_dtype == torch.bfloat16
