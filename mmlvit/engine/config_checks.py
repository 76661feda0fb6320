"""Config checks that run before the Runner builds anything.

mmengine reports some config mistakes late and in its own terms: a
learning-rate scheduler left with no epoch fails after the data and the
model are built ("end should be larger than begin, but got begin=79,
end=79"), and a head count that does not divide the width of mmpretrain's
``VisionTransformer`` fails at the first forward pass with a reshape error.
:func:`check_config` finds these in the config and names the fields to
change.

``tools/train.py`` and ``tools/test.py`` call it. Launchers that do not
(``mim train mmpretrain``, mmpretrain's own tools, a hand-written
``Runner.from_cfg``) still meet mmengine's late errors, except that
mmlvit's ``LinearVisionTransformer`` checks its own head count when it is
built.
"""

import difflib
import inspect
import logging

from mmengine.logging import print_log
from mmengine.runner import Runner

# Top-level keys the Runner reads besides those a config already states.
RUNNER_KEYS = frozenset(inspect.signature(Runner.__init__).parameters) | {
    'custom_imports',
    'model_wrapper_cfg',
    'runner_type',
    'strategy',
}


def check_config(cfg, train=True):
    """Raise ``ValueError`` naming every mistake found in ``cfg``.

    Args:
        cfg (Config | dict): A resolved config.
        train (bool): Also check the training schedule (``train_cfg`` and
            ``param_scheduler``). Defaults to True.
    """
    problems = list(arch_problems(cfg.get('model'), 'model'))
    if train:
        problems += schedule_problems(cfg)
    if problems:
        raise ValueError('\n'.join(problems))


def arch_problems(node, path):
    """Every ``arch`` dict under ``node`` whose ``num_heads`` does not
    divide its ``embed_dims`` (ViT-style backbones, teachers included)."""
    if isinstance(node, dict):
        arch = node.get('arch')
        if isinstance(arch, dict) and _bad_heads(arch):
            yield _heads_message(f'{path}.arch', arch)
        for key, value in node.items():
            yield from arch_problems(value, f'{path}.{key}')
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from arch_problems(value, f'{path}[{i}]')


def _bad_heads(arch):
    dims, heads = arch.get('embed_dims'), arch.get('num_heads')
    if not (isinstance(dims, int) and isinstance(heads, int)):
        return False
    return heads < 1 or dims % heads != 0


def _heads_message(path, arch):
    dims, heads = arch['embed_dims'], arch['num_heads']
    divisors = [d for d in range(1, dims + 1) if dims % d == 0]
    near = sorted(divisors, key=lambda d: (abs(d - heads), d))[:2]
    return (
        f'{path}.num_heads={heads} does not divide embed_dims={dims}: every '
        f'attention head takes embed_dims / num_heads channels. Set '
        f'{path}.num_heads to a divisor of {dims}, e.g. '
        f'{" or ".join(str(d) for d in sorted(near))}.'
    )


def _loop_unit(train_cfg):
    """('epoch', max_epochs) or ('iter', max_iters) of the train loop, or
    None for a loop type this module does not know."""
    loop_type = train_cfg.get('type')
    if loop_type is None:
        by_epoch = train_cfg.get('by_epoch')
    elif loop_type in ('EpochBasedTrainLoop', 'IterBasedTrainLoop'):
        by_epoch = loop_type == 'EpochBasedTrainLoop'
    else:
        return None
    unit = 'epoch' if by_epoch else 'iter'
    length = train_cfg.get(f'max_{unit}s')
    return (unit, length) if isinstance(length, int) else None


def _schedulers(param_scheduler, label='param_scheduler'):
    """(label, scheduler dict) for a list, a single dict, or a dict of
    lists per optimizer."""
    if isinstance(param_scheduler, dict) and 'type' not in param_scheduler:
        for name, value in param_scheduler.items():
            yield from _schedulers(value, f'{label}.{name}')
    elif isinstance(param_scheduler, dict):
        yield label, param_scheduler
    elif isinstance(param_scheduler, (list, tuple)):
        for i, s in enumerate(param_scheduler):
            if isinstance(s, dict):
                yield f'{label}[{i}]', s


def schedule_problems(cfg):
    """Schedulers that would cover no step of training (errors); those
    that reach past its end are logged as warnings.

    A scheduler's ``begin``/``end`` count epochs when its ``by_epoch`` is
    True (the default; also with ``convert_to_iter_based``, which converts
    them later) and iterations otherwise. They are compared with
    ``train_cfg.max_epochs`` or ``max_iters`` when the two count the same
    unit; mmengine gives a scheduler without ``end`` the end of training.
    """
    loop = _loop_unit(cfg.get('train_cfg') or {})
    if loop is None:
        return []
    unit, length = loop
    field = f'train_cfg.max_{unit}s'
    problems, late, ends = [], [], {}
    for label, s in _schedulers(cfg.get('param_scheduler')):
        if s.get('by_epoch', True) != (unit == 'epoch'):
            continue  # counts another unit: not comparable here
        name = f'{label} ({s.get("type")})'
        begin, end = s.get('begin', 0), s.get('end')
        if end is None and begin >= length:
            before = ends.get(begin)
            after = f', where {before} ends,' if before else ''
            problems.append(
                f'{name} begins at {unit} {begin}{after} and runs to the end '
                f'of training, but {field}={length} ends training there: it '
                f'would cover no {unit} (mmengine stops with "end should be '
                f'larger than begin"). Set {field} above {begin}, or make '
                'the schedulers before it end earlier.'
            )
        elif end is not None and end <= begin:
            problems.append(
                f'{name} ends at {unit} {end}, not after its begin {begin}: '
                f'set {label}.end above {label}.begin.'
            )
        elif end is not None and end > length:
            late.append(f'{name} runs to {unit} {end}')
        if end is not None:
            ends[end] = name
    if late and not problems:
        print_log(
            f'{"; ".join(late)}, past the end of training ({field}='
            f'{length}): training stops before the schedule ends.',
            logger='current',
            level=logging.WARNING,
        )
    return problems


def check_override_keys(cfg, options):
    """Raise ``ValueError`` for a ``--cfg-options`` key whose top level is
    neither in ``cfg`` nor read by the Runner but is close to one that is
    (``trian_cfg.max_epochs=5``): ``merge_from_dict`` would add it as a new
    key that nothing reads, and the run would train its old schedule.

    Args:
        cfg (Config): The config the options are merged into.
        options (dict | None): ``--cfg-options`` as ``{dotted key: value}``.
    """
    known = sorted(set(cfg.keys()) | RUNNER_KEYS)
    problems = []
    for key in options or {}:
        top = key.split('.')[0]
        if top in known:
            continue
        near = difflib.get_close_matches(top, known, n=1, cutoff=0.8)
        if near:
            problems.append(
                f'--cfg-options {key}: the config has no key {top!r}; did '
                f'you mean {near[0]!r} ({key.replace(top, near[0], 1)})?'
            )
    if problems:
        raise ValueError('\n'.join(problems))


def merge_cfg_options(cfg, options):
    """Merge ``--cfg-options`` into ``cfg`` once :func:`check_override_keys`
    finds no misspelt key in them.

    Args:
        cfg (Config): The config, changed in place.
        options (dict | None): ``--cfg-options`` as ``{dotted key: value}``;
            None merges nothing.
    """
    if options is not None:
        check_override_keys(cfg, options)
        cfg.merge_from_dict(options)
