"""Evaluate a checkpoint with an mmpretrain-style config.

Example:
    python tools/test.py CONFIG work_dirs/xxx/epoch_10.pth
    bash tools/dist_test.sh CONFIG CHECKPOINT 8
"""

import argparse

import mmlvit  # noqa: F401  (registers the modules, safe loading)
from mmlvit.datasets import check_data_roots
from mmlvit.engine.config_checks import check_config, merge_cfg_options
from mmlvit.engine.optimizers.mixed_precision import amp_summary
from mmlvit.engine.runners.dist import (
    explain_collective_timeout,
    init_cpu_distributed,
)
from mmlvit.engine.runners.fsdp import check_sharded_checkpoint
from mmlvit.engine.runners.runner import build_runner
from mmlvit.utils.cli import parse_launched_args, set_launcher_and_work_dir
from mmlvit.utils.logs import read_config


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Test (evaluate) a model')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='directory for the logs')
    parser.add_argument('--out', help='dump the metrics (.json/.pkl)')
    parser.add_argument(
        '--amp',
        action='store_true',
        help='test with automatic mixed precision (float16 autocast on a '
        'GPU, bfloat16 on the CPU)',
    )
    return parse_launched_args(parser, argv)


def merge_args(cfg, args):
    """Merge command line arguments into the config."""
    set_launcher_and_work_dir(cfg, args)
    cfg.load_from = args.checkpoint
    if args.amp:
        cfg.test_cfg.fp16 = True
    merge_cfg_options(cfg, args.cfg_options)
    loader = cfg.test_dataloader
    loader.setdefault('persistent_workers', True)
    if loader.get('num_workers', 0) == 0:
        loader.persistent_workers = False
    return cfg


def main(argv=None):
    args = parse_args(argv)
    cfg = merge_args(read_config(args.config), args)
    check_config(cfg, train=False)
    check_data_roots(cfg, loaders=('test_dataloader',))
    check_sharded_checkpoint(cfg, args.checkpoint)
    init_cpu_distributed(cfg)
    runner = build_runner(cfg)
    if args.amp and amp_summary():
        runner.logger.info(amp_summary())
    with explain_collective_timeout(cfg):
        metrics = runner.test()
    if args.out:
        from mmengine.fileio import dump

        dump(metrics, args.out)
    return metrics


if __name__ == '__main__':
    main()
