"""What a training step keeps for backward, counted tensor by tensor
(lab.benchmarks.tensor_memory), against byte counts worked out by hand,
and tools/analysis/train_memory.py end to end on a tiny arch (in a
subprocess: it runs the fused kernels under Triton's interpreter)."""

import json
import sys

import torch
from tool_runs import run_ok
from torch import nn

from lab.benchmarks import tensor_memory
from mmlvit.ops.common.recompute import recomputed

FLOAT = 4


def test_saved_storages_counts_each_storage_once_without_parameters():
    """x * w saves x (and w, a parameter: left out); a * a' with a' a view
    of a saves one storage twice: counted once; an activation-checkpointed
    function keeps its input only."""
    w = nn.Parameter(torch.randn(64, 32))
    x = torch.randn(64, 32, requires_grad=True)

    def forward():
        a = x * w
        b = a * a.view(-1).view(64, 32)
        return recomputed(lambda t: t.sin().cos(), b)

    found = tensor_memory.saved_storages(forward, exclude=[w])
    # x, a and b (kept by the checkpoint); sin's output is recomputed.
    sizes = [size for size, _, _ in found.values()]
    assert sorted(sizes) == [64 * 32 * FLOAT] * 3


class ToyViT(nn.Module):
    """Images -> a flat Linear -> blocks of Linear + ReLU, 64 wide. The
    first block's Linear keeps the embedding's output (E); each ReLU keeps
    its output, which the next Linear keeps too (b: 64 floats). The
    images, made before the step, are not counted."""

    def __init__(self, blocks, size):
        super().__init__()
        self.embed = nn.Linear(3 * size * size, 64)
        self.blocks = nn.Sequential(
            *(
                nn.Sequential(nn.Linear(64, 64), nn.ReLU())
                for _ in range(blocks)
            )
        )

    def forward(self, images):
        return self.blocks(self.embed(images.flatten(1)))


def test_per_image_figures_solve_for_the_block_and_the_rest():
    size = 1
    figures = tensor_memory.per_image_figures(
        lambda n: ToyViT(n, size), size, None
    )
    mib = tensor_memory.MIB
    figures = {k: v * mib for k, v in figures.items()}
    assert figures == dict(
        per_block=64 * FLOAT, outside_blocks=64 * FLOAT, batch_independent=0
    )
    model = tensor_memory.model_mib_per_image(figures, 12)
    assert model == 13 * 64 * FLOAT


def test_tool_tables_every_model_on_a_tiny_arch(tmp_path):
    """deit-tiny at 32 px (2 x 2 patches): the softmax ViT, and ReLU, GLA
    and TTT on their fused kernels, interpreted."""
    run_ok(
        [sys.executable, 'tools/analysis/train_memory.py']
        + ['--operators', 'ReLULinearAttention', 'GatedLinearAttention']
        + ['TTTAttention', '--arch', 'deit-tiny', '--resolutions', '32']
        + ['--out-dir', str(tmp_path)],
        cwd='.',
        timeout=300,
    )
    results = json.loads((tmp_path / 'results.json').read_text())
    paths = {name: r['32']['path'] for name, r in results.items()}
    assert paths == {
        'softmax': 'SDPA',
        'ReLULinearAttention': 'fused (interpreted)',
        'GatedLinearAttention': 'fused (interpreted)',
        'TTTAttention': 'fused (interpreted)',
    }
    ref = results['softmax']['32']
    for name, r in results.items():
        f = r['32']
        assert f['per_block'] > 0 and f['outside_blocks'] > 0, name
        model = f['outside_blocks'] + 12 * f['per_block']
        assert abs(f['model'] - model) < 1e-9, name
    # Under bf16 autocast GLA keeps no fp32 gates, and its output gate and
    # proj are recomputed: no more than ReLU (q, k, v, the attention output
    # and the MLP's tensors).
    gla = results['GatedLinearAttention']['32']
    relu = results['ReLULinearAttention']['32']
    assert gla['per_block'] <= relu['per_block'] < 1.2 * ref['per_block']
    table = (tmp_path / 'table.md').read_text()
    assert '| GatedLinearAttention | fused (interpreted) | 32 |' in table
