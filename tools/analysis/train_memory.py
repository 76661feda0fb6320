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

import argparse  # noqa: E402
import os.path as osp  # noqa: E402

import torch  # noqa: E402
from mmengine.utils import mkdir_or_exist  # noqa: E402

import mmlvit  # noqa: E402, F401

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # lab/
from lab import benchmarks as core  # noqa: E402
from lab.benchmarks import tensor_memory  # noqa: E402
from lab.benchmarks.vit_models import (  # noqa: E402
    SOFTMAX,
    counted_models,
    depth_builder,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Activation memory a ViT training step keeps for '
        'backward, per image, softmax vs every linear operator (the fused '
        "kernels' path under Triton's interpreter; no GPU needed).",
    )
    core.add_counted_step_arguments(parser)
    core.add_out_dir_argument(
        parser, 'work_dirs/train_memory', 'table.md and results.json'
    )
    return core.resolve_counted_step(parser.parse_args(argv))


def measure(args):
    """{model: {size: figures}}, printing each as it comes."""
    results = {}
    for name, path in counted_models(args.operators):
        for size in args.resolutions:
            build = depth_builder(name, args.arch, size)
            figures = tensor_memory.per_image_figures(
                build, size, args.autocast
            )
            figures['model'] = tensor_memory.model_mib_per_image(
                figures, args.depth
            )
            figures['path'] = path
            results.setdefault(name, {})[str(size)] = figures
            print(f'{name} {size} px: {figures}', flush=True)
    return results


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
    torch.set_num_threads(1)
    mkdir_or_exist(args.out_dir)
    results = measure(args)
    core.write_json(osp.join(args.out_dir, 'results.json'), results)
    lines = table(results, args)
    lines.insert(
        0, f'arch {args.arch}, autocast {args.dtype}, MiB per image\n'
    )
    core.write_table(osp.join(args.out_dir, 'table.md'), '\n'.join(lines), [])


if __name__ == '__main__':
    main()
