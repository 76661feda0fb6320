"""Command-line pieces the project's tools share."""

import argparse

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
