"""Files that ship with mmlvit (e.g. the tiny softmax teacher under
``checkpoints/``), found from any working directory.

Configs name shipped files by paths relative to the repository root, as
``teacher_checkpoint='checkpoints/vit-tiny-p4_softmax_fashion-mnist.pth'``.
From a checkout that is the working directory of ``tools/train.py``; an
installed package keeps the same tree under ``mmlvit/.mim/`` (as ``mim``
expects for configs and tools), so ``mim train mmlvit CONFIG`` run from
another folder still finds them.
"""

import os.path as osp

PACKAGE_DIR = osp.dirname(osp.dirname(osp.realpath(__file__)))
# Where a relative path of a shipped file may live: an installed package's
# copy, then the checkout the package is imported from.
SHIPPED_ROOTS = (osp.join(PACKAGE_DIR, '.mim'), osp.dirname(PACKAGE_DIR))


def shipped_path(path: str) -> str:
    """``path`` if it exists; else the shipped file of that relative path,
    if there is one; else ``path`` unchanged (the reader then names it).

    Args:
        path (str): A file path.

    Returns:
        str: The path to read.
    """
    if osp.exists(path) or osp.isabs(path):
        return path
    for root in SHIPPED_ROOTS:
        candidate = osp.join(root, path)
        if osp.exists(candidate):
            return candidate
    return path
