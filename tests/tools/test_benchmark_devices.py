"""Every benchmark tool refuses ``--device cuda`` without a GPU, naming
why, before it builds anything."""

import pytest
import torch

TOOLS = ['attention', 'model', 'distill', 'dense']


@pytest.mark.skipif(torch.cuda.is_available(), reason='has CUDA')
@pytest.mark.parametrize('name', TOOLS)
def test_cuda_without_a_gpu_is_refused(load_tool, name, capsys):
    bench = load_tool(f'tools/analysis/benchmark_{name}.py')
    with pytest.raises(SystemExit):
        bench.parse_args(['--device', 'cuda'])
    assert '--device cuda: no CUDA GPU' in capsys.readouterr().err
