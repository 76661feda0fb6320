"""Command-line pieces the project's tools share."""

import argparse
import os

from mmengine.config import DictAction

CFG_OPTIONS_HELP = 'override config entries, e.g. key=value or key="[a,b]"'


def add_cfg_options(
    parser: argparse.ArgumentParser, help: str = CFG_OPTIONS_HELP
) -> None:
    """``--cfg-options KEY=VALUE ...`` (mmengine's ``DictAction``), as
    tools/train.py takes it."""
    parser.add_argument(
        '--cfg-options', nargs='+', action=DictAction, help=help
    )


def add_launcher_arguments(parser: argparse.ArgumentParser) -> None:
    """``--launcher`` and ``--local-rank`` as OpenMMLab's train and test
    scripts take them (``torch.distributed.launch`` passes the rank)."""
    parser.add_argument(
        '--launcher',
        default='none',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        help='job launcher',
    )
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)


def parse_launched_args(
    parser: argparse.ArgumentParser, argv: list[str] | None = None
) -> argparse.Namespace:
    """Parse the arguments of a script with :func:`add_launcher_arguments`,
    its ``--cfg-options`` last (:func:`add_cfg_options`), and export
    ``--local-rank`` as ``LOCAL_RANK`` where the launcher did not."""
    add_cfg_options(parser)
    add_launcher_arguments(parser)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def set_launcher_and_work_dir(cfg, args: argparse.Namespace) -> None:
    """``cfg.launcher`` from ``--launcher``; ``cfg.work_dir`` from
    ``--work-dir``, else the config's own, else ``./work_dirs/<config
    name>`` (as OpenMMLab's train and test scripts choose it)."""
    cfg.launcher = args.launcher
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        name = os.path.splitext(os.path.basename(args.config))[0]
        cfg.work_dir = os.path.join('./work_dirs', name)
