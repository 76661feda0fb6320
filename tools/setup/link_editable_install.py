"""Let ``mim`` find an editable install of mmlvit.

``mim train/test/run mmlvit`` look for the package at
``<site-packages>/mmlvit`` and for its configs and tools under its
``.mim/``. An editable install (``pip install -e .``) leaves no ``mmlvit``
folder in site-packages, so mim stops with "can't open file". This links
``<site-packages>/mmlvit`` to the checkout's package (whose ``.mim/`` holds
links to configs/, tools/ and checkpoints/, made by setup.py) and adds the
link to the install's RECORD, so that ``pip uninstall mmlvit`` or a later
``pip install .`` removes the link instead of writing through it.

``make setup`` runs it; after a plain ``pip install -e .`` run
``python tools/setup/link_editable_install.py`` once.

Usage: link_editable_install.py [--site DIR]
"""

import argparse
import json
import os
import os.path as osp
import sys
from importlib import metadata
from urllib.parse import unquote, urlparse

LINK = 'mmlvit'


def editable_distribution(site=None):
    """(distribution, checkout) of the editable mmlvit install found on
    ``site`` (default: ``sys.path``).

    Raises:
        SystemExit: mmlvit is not installed there, or not in editable mode.
    """
    paths = [site] if site else sys.path
    found = list(metadata.distributions(name='mmlvit', path=paths))
    if not found:
        where = site or 'this Python'
        raise SystemExit(
            f'mmlvit is not installed in {where}: run '
            '`pip install -e .` in the checkout first.'
        )
    dist = found[0]
    direct_url = json.loads(dist.read_text('direct_url.json') or '{}')
    if not direct_url.get('dir_info', {}).get('editable'):
        raise SystemExit(
            f'mmlvit in {dist.locate_file("")} is a regular install; mim '
            'finds its configs and tools already, nothing to link.'
        )
    return dist, unquote(urlparse(direct_url['url']).path)


def link_editable_install(site=None) -> str:
    """Link ``<site>/mmlvit`` to the checkout's package; return the link.

    Raises:
        SystemExit: The checkout lacks ``mmlvit/.mim`` or ``<site>/mmlvit``
            is something else than this link.
    """
    dist, checkout = editable_distribution(site)
    package = osp.join(checkout, 'mmlvit')
    if not osp.isfile(osp.join(package, '.mim', 'tools', 'train.py')):
        raise SystemExit(
            f'{package}/.mim has no tools/train.py: run `pip install -e .` '
            'in the checkout again (setup.py links configs/ and tools/ '
            'there).'
        )
    root = str(dist.locate_file(''))
    link = osp.join(root, LINK)
    if osp.islink(link) and osp.realpath(link) != osp.realpath(package):
        os.remove(link)  # left by an install from another checkout
    if not osp.lexists(link):
        os.symlink(package, link)
    elif not osp.islink(link):
        raise SystemExit(
            f'{link} is a regular package, not an editable install: '
            'run `pip uninstall mmlvit` and install again.'
        )
    record = next(f for f in dist.files if f.name == 'RECORD')
    record = str(dist.locate_file(record))
    with open(record) as f:
        listed = {line.split(',')[0] for line in f}
    if LINK not in listed:
        with open(record, 'a') as f:
            f.write(f'{LINK},,\n')
    return link


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='Let mim find an editable install of mmlvit.'
    )
    parser.add_argument(
        '--site',
        help='the folder the install went to (pip install --target); '
        'default: where this Python finds mmlvit',
    )
    args = parser.parse_args(argv)
    link = link_editable_install(args.site)
    print(f'mim finds mmlvit through {link} -> {os.readlink(link)}')


if __name__ == '__main__':
    sys.exit(main())
