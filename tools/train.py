"""Train a model from an mmpretrain-style config (mmlvit modules included).

Examples:
    python tools/train.py configs/lvit/vit-b_gla_copy-distill_in1k.py
    python tools/train.py CONFIG --resume            # latest in work_dir
    python tools/train.py CONFIG --cfg-options train_dataloader.batch_size=64
    bash tools/dist_train.sh CONFIG 8                # DDP via torchrun
"""

import argparse

import torch

import mmlvit  # noqa: F401  (registers the modules, safe loading)
from mmlvit.checkpoint.work_dir_lock import acquire_work_dir, is_rank_zero
from mmlvit.datasets import check_data_roots
from mmlvit.engine.config_checks import check_config, merge_cfg_options
from mmlvit.engine.optimizers.mixed_precision import amp_summary, amp_type
from mmlvit.engine.runners.dist import (
    explain_collective_timeout,
    init_cpu_distributed,
)
from mmlvit.engine.runners.runner import build_runner
from mmlvit.utils.cli import parse_launched_args, set_launcher_and_work_dir
from mmlvit.utils.logs import read_config

DATALOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument(
        '--work-dir', help='directory for logs and checkpoints'
    )
    parser.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from this checkpoint, or without a path from the latest '
        'checkpoint in the work directory',
    )
    parser.add_argument(
        '--amp',
        action='store_true',
        help='automatic mixed precision training (float16 autocast with '
        'loss scaling on a GPU, bfloat16 autocast on the CPU)',
    )
    parser.add_argument(
        '--no-validate',
        action='store_true',
        help='skip validation during training',
    )
    parser.add_argument(
        '--auto-scale-lr',
        action='store_true',
        help='scale the lr by actual / base batch size',
    )
    parser.add_argument(
        '--no-pin-memory',
        action='store_true',
        help='disable pin_memory in the dataloaders',
    )
    parser.add_argument(
        '--no-persistent-workers',
        action='store_true',
        help='disable persistent_workers in the dataloaders (it is already '
        'off for any dataloader with num_workers=0)',
    )
    return parse_launched_args(parser, argv)


def set_dataloader_defaults(cfg, args):
    """Fill pin_memory/persistent_workers as mmpretrain's train.py does,
    except that persistent workers are never requested without workers."""
    for field in DATALOADERS:
        loader = cfg.get(field)
        if loader is None:
            continue
        loader.setdefault('collate_fn', dict(type='default_collate'))
        loader.setdefault('pin_memory', torch.cuda.is_available())
        loader.setdefault('persistent_workers', True)
        if args.no_pin_memory:
            loader.pin_memory = False
        if args.no_persistent_workers or loader.get('num_workers', 0) == 0:
            loader.persistent_workers = False


def merge_args(cfg, args):
    """Merge command line arguments into the config."""
    if args.no_validate:
        cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    set_launcher_and_work_dir(cfg, args)
    if args.amp:
        # The mixed-precision form of the configured wrapper (the
        # non-finite-update guard stays on).
        cfg.optim_wrapper.type = amp_type(
            cfg.optim_wrapper.get('type', 'OptimWrapper')
        )
        cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
        # Validation autocasts as tools/test.py --amp does.
        if cfg.get('val_cfg') is not None:
            cfg.val_cfg.fp16 = True
    if args.resume == 'auto':
        cfg.resume, cfg.load_from = True, None
    elif args.resume is not None:
        cfg.resume, cfg.load_from = True, args.resume
    if args.auto_scale_lr:
        cfg.auto_scale_lr.enable = True
    merge_cfg_options(cfg, args.cfg_options)
    set_dataloader_defaults(cfg, args)
    return cfg


def main(argv=None):
    args = parse_args(argv)
    cfg = merge_args(read_config(args.config), args)
    check_config(cfg)
    check_data_roots(cfg)
    taken_over = None
    if is_rank_zero(cfg.launcher) and '://' not in cfg.work_dir:
        # One live run per work dir (rank 0 holds it for the job).
        taken_over = acquire_work_dir(cfg.work_dir)
    init_cpu_distributed(cfg)
    runner = build_runner(cfg)
    if taken_over:
        runner.logger.warning(taken_over)
    if args.amp and amp_summary():
        runner.logger.info(amp_summary())
    with explain_collective_timeout(cfg):
        runner.train()


if __name__ == '__main__':
    main()
