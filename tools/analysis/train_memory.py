"""The activation memory of a ViT training step, per image, without a
GPU: mmpretrain's softmax ViT against a linear ViT of every operator,
counted tensor by tensor (:mod:`lab.benchmarks.tensor_memory`).

The operators with fused Triton kernels run them, as on a GPU, under
Triton's interpreter on the CPU (set here before Triton imports), so the
tensors kept are the GPU path's; the others run their PyTorch path, which
is also their GPU path. The forward runs under autocast (``--dtype``,
default bf16, as training on a GPU does). The figures are exact byte
counts of what autograd keeps for backward, not timings: per image and
block, and for a ViT of ``--depth`` blocks (with the patch embedding and
the final norm), each with its ratio to the softmax ViT's. At a large
batch this is the train step's peak on a GPU less what one block's
backward allocates on top of it (the weight copies and gradients, the
same for any batch, are left out).

Example::

    python tools/analysis/train_memory.py --out-dir work_dirs/train_memory
"""

import os
import sys
from pathlib import Path

os.environ.setdefault('TRITON_INTERPRET', '1')  # before triton imports

import mmlvit  # noqa: E402, F401

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab import benchmarks as core  # noqa: E402
from lab.benchmarks import counted_step, tensor_memory  # noqa: E402
from lab.benchmarks.vit_models import SOFTMAX  # noqa: E402


def parse_args(argv=None):
    parser = counted_step.make_parser(
        'Activation memory a ViT training step keeps for backward, per image'
    )
    return counted_step.parse(parser, 'work_dirs/train_memory', argv)


def figures_of(build, size, args):
    """MiB per image kept for backward: per block, outside the blocks and
    for a ``--depth``-block ViT (``model``)."""
    figures = tensor_memory.per_image_figures(build, size, args.autocast)
    figures['model'] = tensor_memory.model_mib_per_image(figures, args.depth)
    return figures


def table(results, args):
    """Markdown lines: per model and resolution the MiB per image kept for
    backward, per block and for a ``--depth``-block ViT, with their ratios
    to softmax."""
    header = ['model', 'path', 'px', 'per block', 'vs softmax']
    header += [f'{args.depth} blocks', 'vs softmax']
    rows = []
    for size in map(str, args.resolutions):
        ref = results[SOFTMAX][size]
        for name, by_size in results.items():
            f = by_size[size]
            rows.append(
                [name, f['path'], size, f'{f["per_block"]:.2f}']
                + [f'{f["per_block"] / ref["per_block"]:.2f}x']
                + [f'{f["model"]:.1f}', f'{f["model"] / ref["model"]:.2f}x']
            )
    return core.markdown_table(header, rows, '--' + ':' * 5)


def main(argv=None):
    args = parse_args(argv)
    heading = f'arch {args.arch}, autocast {args.dtype}, MiB per image\n'
    counted_step.run(
        args,
        lambda build, size: figures_of(build, size, args),
        lambda name, size, figures: f'{name} {size} px: {figures}',
        lambda results: [heading, *table(results, args)],
    )


if __name__ == '__main__':
    main()
