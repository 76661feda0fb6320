"""The ``_base_`` tree of a config file, read from its source (nothing is
executed): the files it inherits, across packages (``mmpretrain::``,
``mmdet::``, ``mmseg::`` bases are followed into the installed package's
``.mim/configs``)."""

import ast
import functools
import os.path as osp

from mmengine.config.utils import _get_package_and_cfg_path
from mmengine.utils import get_installed_path


def _resolve(base, folder):
    """Absolute path of one ``_base_`` entry of a file in ``folder``."""
    if '::' in base:
        package, relative = _get_package_and_cfg_path(base)
        return osp.join(
            get_installed_path(package), '.mim', 'configs', relative
        )
    return osp.normpath(osp.join(folder, base))


def base_files(path: str) -> tuple[str, ...]:
    """Absolute paths of the files a config's ``_base_`` names (none when
    it states no ``_base_``)."""
    with open(path) as f:
        tree = ast.parse(f.read())
    for statement in tree.body:
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.targets[0], ast.Name)
            and statement.targets[0].id == '_base_'
        ):
            bases = ast.literal_eval(statement.value)
            bases = [bases] if isinstance(bases, str) else bases
            folder = osp.dirname(path)
            return tuple(_resolve(base, folder) for base in bases)
    return ()


@functools.cache
def longest_chain(path: str) -> tuple[str, ...]:
    """The longest ``_base_`` chain from ``path`` down, ``path`` first:
    ``(path,)`` for a config without bases, three files for leaf ->
    experiment base -> model base."""
    chains = [longest_chain(base) for base in base_files(path)]
    return (path, *max(chains, key=len, default=()))
