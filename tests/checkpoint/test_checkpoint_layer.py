"""mmlvit.checkpoint is the bottom layer: every layer of mmlvit reads and
writes checkpoints through it, so it imports only the standard library,
torch, mmengine, numpy, safetensors and mmlvit.utils."""

import ast
import glob
import os.path as osp
import sys

import mmlvit.checkpoint

ALLOWED = {'torch', 'mmengine', 'numpy', 'safetensors'}


def imported_modules(path):
    """The absolute module names ``path`` imports (relative imports stay
    inside the package and are left out)."""
    with open(path) as file:
        tree = ast.parse(file.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def test_checkpoint_package_imports_only_the_layers_below():
    folder = osp.dirname(mmlvit.checkpoint.__file__)
    files = sorted(glob.glob(osp.join(folder, '*.py')))
    assert len(files) > 1
    wrong = [
        f'{osp.basename(path)}: {name}'
        for path in files
        for name in imported_modules(path)
        if not (
            name.split('.')[0] in ALLOWED | set(sys.stdlib_module_names)
            or name == 'mmlvit.utils'
            or name.startswith('mmlvit.utils.')
        )
    ]
    assert wrong == []
