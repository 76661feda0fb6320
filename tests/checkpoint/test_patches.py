"""``import mmlvit`` changes exactly the mmengine and torch settings that
mmlvit.checkpoint.patches lists, and installing again changes nothing."""

import json
import subprocess
import sys

# Run in a fresh interpreter: what mmengine and torch hold before mmlvit is
# imported, after, and after a second install().
SCRIPT = r"""
import json

import mmengine.fileio.backends.registry_utils as backends
import torch
import torch._dynamo  # noqa: F401
from mmengine.runner.checkpoint import CheckpointLoader

# torch allow-lists its own types when these are first imported.
if torch.distributed.is_available():
    import torch.distributed.tensor  # noqa: F401


def name(obj):
    return f'{obj.__module__}.{obj.__qualname__}'


def state():
    return dict(
        schemes=dict(CheckpointLoader._schemes),
        backends=dict(backends.backends),
        prefixes=dict(backends.prefix_to_backends),
        safe=set(torch.serialization.get_safe_globals()),
    )


def changes(before, after):
    found = {}
    for kind in ('schemes', 'backends', 'prefixes'):
        for key, value in after[kind].items():
            if before[kind].get(key) is not value:
                found[f'{kind}[{key!r}]'] = name(value)
    added = after['safe'] - before['safe']
    return found, added, before['safe'] - after['safe']


before = state()
import mmlvit  # noqa: E402
from mmlvit.checkpoint import SAFE_GLOBALS, patches  # noqa: E402

installed = state()
found, added, removed = changes(before, installed)
patches.install()
again, added_again, removed_again = changes(installed, state())
print(json.dumps(dict(
    changed=found,
    safe_globals_are_the_allow_list=added == set(SAFE_GLOBALS),
    safe_globals_added=len(added),
    safe_globals_removed=len(removed),
    allow_list_installed=set(SAFE_GLOBALS) <= installed['safe'],
    second_install=dict(
        changed=again, added=len(added_again), removed=len(removed_again)
    ),
)))
"""


def test_import_installs_exactly_the_listed_patches():
    done = subprocess.run(
        [sys.executable, '-c', SCRIPT],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report['changed'] == {
        "schemes['']": 'mmlvit.checkpoint.patches.load_local',
        "backends['local']": (
            'mmlvit.checkpoint.atomic_files.AtomicLocalBackend'
        ),
        "prefixes['']": 'mmlvit.checkpoint.atomic_files.AtomicLocalBackend',
    }
    assert report['allow_list_installed']
    assert report['safe_globals_are_the_allow_list']
    assert report['safe_globals_added'] > 0
    assert report['safe_globals_removed'] == 0
    assert report['second_install'] == dict(changed={}, added=0, removed=0)
