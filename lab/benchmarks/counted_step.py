"""The frame of the tools that count a ViT training step without a GPU
(``tools/analysis/train_memory.py``, ``step_traffic.py``): their
arguments, the run over every counted model and resolution, and the
``results.json`` and ``table.md`` they write."""

import argparse
import os.path as osp

import torch
from mmengine.utils import mkdir_or_exist

from .options import (
    add_counted_step_arguments,
    add_out_dir_argument,
    resolve_counted_step,
)
from .report import write_json, write_table
from .vit_models import counted_models, depth_builder


def make_parser(what):
    """An argument parser with :func:`.options.add_counted_step_arguments`'
    arguments, described as ``what`` (e.g. ``'Bytes a ViT training step
    moves, per image'``) of softmax vs every linear operator."""
    parser = argparse.ArgumentParser(
        description=f'{what}, softmax vs every linear operator (the fused '
        "kernels' path under Triton's interpreter; no GPU needed).",
    )
    add_counted_step_arguments(parser)
    return parser


def parse(parser, default_out_dir, argv=None):
    """Add ``--out-dir`` (default ``default_out_dir``) to ``parser`` (from
    :func:`make_parser`), parse ``argv`` and resolve the defaults
    (:func:`.options.resolve_counted_step`)."""
    add_out_dir_argument(parser, default_out_dir, 'table.md and results.json')
    return resolve_counted_step(parser.parse_args(argv))


def run(args, figures_of, describe, table):
    """Count the softmax ViT and a linear ViT of each of ``args.operators``
    at each of ``args.resolutions`` on one thread, and write the results.

    Args:
        args (Namespace): From :func:`parse`.
        figures_of (callable): ``(build, size) -> dict`` of figures, where
            ``build`` is ``blocks -> model`` (:func:`.vit_models.
            depth_builder`) and ``size`` the resolution in pixels; the
            model's path (``'SDPA'``, ``'fused (interpreted)'``,
            ``'PyTorch'``) is added to the dict as ``path``.
        describe (callable): ``(name, size, figures) -> str``, the line
            printed as each model's figures come.
        table (callable): ``results -> list[str]``, the lines of
            ``table.md`` (printed too).

    Returns:
        dict: ``{model: {str(size): figures}}``, also in ``results.json``
        under ``args.out_dir``.
    """
    torch.set_num_threads(1)
    mkdir_or_exist(args.out_dir)
    results = {}
    for name, path in counted_models(args.operators):
        for size in args.resolutions:
            figures = figures_of(depth_builder(name, args.arch, size), size)
            figures['path'] = path
            results.setdefault(name, {})[str(size)] = figures
            print(describe(name, size, figures), flush=True)
    write_json(osp.join(args.out_dir, 'results.json'), results)
    lines = table(results)
    write_table(osp.join(args.out_dir, 'table.md'), '\n'.join(lines), [])
    return results
