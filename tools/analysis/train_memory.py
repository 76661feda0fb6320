"""The activation memory of a ViT training step, per image, without a
GPU: mmpretrain's softmax ViT against a linear ViT of every operator,
counted tensor by tensor (:mod:`mmlvit.benchmark.tensor_memory`).

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

os.environ.setdefault('TRITON_INTERPRET', '1')  # before triton imports

import argparse  # noqa: E402
import inspect  # noqa: E402
import os.path as osp  # noqa: E402

import torch  # noqa: E402
from mmengine.utils import mkdir_or_exist  # noqa: E402
from mmpretrain.models import VisionTransformer  # noqa: E402

import mmlvit  # noqa: E402, F401
from mmlvit import benchmark as core  # noqa: E402
from mmlvit.benchmark import tensor_memory  # noqa: E402
from mmlvit.benchmark.vit_models import SOFTMAX, build_model  # noqa: E402
from mmlvit.models.attentions import registered_operators  # noqa: E402
from mmlvit.ops.triton_runtime import interpreting  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Activation memory a ViT training step keeps for '
        'backward, per image, softmax vs every linear operator (the fused '
        "kernels' path under Triton's interpreter; no GPU needed).",
    )
    core.add_operator_argument(parser)
    parser.add_argument(
        '--resolutions', nargs='+', type=int, default=[224], help='pixels'
    )
    parser.add_argument(
        '--dtype',
        choices=tuple(core.DTYPES),
        default='bf16',
        help='autocast dtype of the forward (default: %(default)s)',
    )
    parser.add_argument(
        '--arch', default='b', help='ViT arch (zoo name; default: b)'
    )
    parser.add_argument(
        '--depth',
        type=int,
        default=None,
        help="blocks of the whole-model figure (default: the arch's)",
    )
    core.add_out_dir_argument(
        parser, 'work_dirs/train_memory', 'table.md and results.json'
    )
    args = parser.parse_args(argv)
    args.operators = core.operators_or_all(args.operators)
    zoo = VisionTransformer.arch_zoo[args.arch]
    args.depth = args.depth or zoo['num_layers']
    return args


def kernel_options(operator):
    """``dict(backend='triton')`` where the operator has fused kernels and
    Triton's interpreter runs them here, else no options."""
    cls = registered_operators()[operator]
    takes_backend = 'backend' in inspect.signature(cls.__init__).parameters
    return dict(backend='triton') if takes_backend and interpreting() else {}


def builder(name, arch, size):
    """``blocks -> model``: the softmax ViT or a linear ViT of ``name`` with
    ``blocks`` blocks of ``arch``'s shape."""
    options = kernel_options(name) if name != SOFTMAX else None
    return lambda blocks: build_model(name, arch, size, blocks, options)


def measure(args):
    """{model: {size: figures}}, printing each as it comes."""
    dtype = core.DTYPES[args.dtype]
    dtype = None if dtype == torch.float32 else dtype
    results = {}
    for name in [SOFTMAX, *args.operators]:
        path = 'SDPA'
        if name != SOFTMAX:
            fused = kernel_options(name)
            path = 'fused (interpreted)' if fused else 'PyTorch'
        for size in args.resolutions:
            build = builder(name, args.arch, size)
            figures = tensor_memory.per_image_figures(build, size, dtype)
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
