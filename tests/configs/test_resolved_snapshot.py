"""What users see stays as it is: every config resolves to the same leaves,
and importing mmlvit registers the same names, as recorded in
``tests/data/resolved_snapshot.json``.

A deliberate change to a config or a registry name rewrites the record:
``python tests/configs/test_resolved_snapshot.py`` (from the repository
root, in the environment ``make test`` builds, dense stack included); the
diff of the JSON file then shows every changed leaf for review.
"""

import glob
import json
import os.path as osp
import sys

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
RECORD = osp.join(ROOT, 'tests', 'data', 'resolved_snapshot.json')
REGISTRIES = (
    'DATASETS',
    'HOOKS',
    'LOOPS',
    'METRICS',
    'MODELS',
    'OPTIM_WRAPPERS',
    'OPTIM_WRAPPER_CONSTRUCTORS',
    'RUNNERS',
    'STRATEGIES',
    'TRANSFORMS',
    'WEIGHT_INITIALIZERS',
)


def config_paths():
    """Every config file under configs/, relative to the repository root."""
    pattern = osp.join(ROOT, 'configs', '**', '*.py')
    return sorted(
        osp.relpath(p, ROOT) for p in glob.glob(pattern, recursive=True)
    )


def leaves(value, prefix=''):
    """``{dotted key: repr of the leaf}`` of a resolved config; lists and
    tuples are indexed (``a.[0]`` / ``a.(0)``) so that a list that becomes a
    tuple shows as a change."""
    if isinstance(value, dict):
        out = {}
        for key in sorted(value, key=str):
            out.update(leaves(value[key], f'{prefix}{key}.'))
        return out or {prefix.rstrip('.'): '{}'}
    if isinstance(value, (list, tuple)):
        brackets = '[]' if isinstance(value, list) else '()'
        out = {}
        for i, item in enumerate(value):
            index = f'{brackets[0]}{i}{brackets[1]}'
            out.update(leaves(item, f'{prefix}{index}.'))
        return out or {prefix.rstrip('.'): brackets}
    return {prefix.rstrip('.'): repr(value)}


def resolved(path):
    from mmengine.config import Config

    return leaves(Config.fromfile(osp.join(ROOT, path)).to_dict())


def registered_names():
    """``{registry: sorted names}`` of what mmlvit registers, in
    mmpretrain's registries or their mmengine parents (a class defined in an
    ``mmlvit`` module)."""
    import mmengine.registry
    import mmpretrain.registry

    import mmlvit  # noqa: F401

    names = {}
    for attr in REGISTRIES:
        found = set()
        for package in (mmpretrain.registry, mmengine.registry):
            registry = getattr(package, attr, None)
            for name, obj in getattr(registry, 'module_dict', {}).items():
                if getattr(obj, '__module__', '').startswith('mmlvit'):
                    found.add(name)
        names[attr] = sorted(found)
    return names


def snapshot():
    return dict(
        configs={path: resolved(path) for path in config_paths()},
        registries=registered_names(),
    )


@pytest.fixture(scope='module')
def record():
    # Dense configs inherit from mmseg:: / mmdet:: bases.
    pytest.importorskip('mmseg')
    pytest.importorskip('mmdet')
    with open(RECORD) as f:
        return json.load(f)


def test_every_config_resolves_as_recorded(record):
    assert sorted(record['configs']) == config_paths()
    for path, recorded in record['configs'].items():
        now = resolved(path)
        changed = sorted(
            key
            for key in set(now) | set(recorded)
            if now.get(key) != recorded.get(key)
        )
        assert not changed, (
            f'{path}: these resolved leaves differ from the record '
            f'(key: now / recorded): '
            + '; '.join(
                f'{k}: {now.get(k)} / {recorded.get(k)}' for k in changed[:10]
            )
        )


def test_registered_names_as_recorded(record):
    assert registered_names() == record['registries']


if __name__ == '__main__':
    with open(RECORD, 'w') as f:
        json.dump(snapshot(), f, indent=1, sort_keys=True)
        f.write('\n')
    print('wrote', RECORD, file=sys.stderr)
