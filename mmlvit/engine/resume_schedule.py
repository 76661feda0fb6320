"""Resuming with another training length.

mmengine restores the parameter schedulers of a checkpoint as they were
saved, their end included. A scheduler whose end follows the training
length (``end`` unset: "to the end of training", as the cosine of every
shipped schedule) then keeps the old run's end: resumed with a larger
``train_cfg.max_epochs``, a finished cosine stays at its minimum learning
rate for all the extra epochs. Here such a schedule is rebuilt from the
config for the new length and advanced to the resumed iteration, so that
from there on the learning rate is exactly what a run configured with the
new length from the start would use.
"""

import logging

from mmengine.logging import print_log

# Scheduler attributes that depend on the training length (the rest of a
# scheduler's state is its progress).
LENGTH_KEYS = ('begin', 'end', 'T_max', 'total_iters', 'total_steps')


def schedule_changes(saved, schedulers):
    """How the resumed checkpoint's schedule differs from the config's.

    Args:
        saved (list[dict] | None): ``checkpoint['param_schedulers']``.
        schedulers (list | None): The runner's schedulers, built from the
            config for this run's length (not yet loaded from the
            checkpoint).

    Returns:
        list[str]: e.g. ``['param_scheduler[1] (CosineAnnealingLR): end
        8 -> 12']``; empty when the lengths agree or there is nothing to
        compare (no saved state, one scheduler list per optimizer).
    """
    if not isinstance(saved, list) or not isinstance(schedulers, list):
        return []
    if len(saved) != len(schedulers):
        return [
            f'{len(saved)} schedulers in the checkpoint, {len(schedulers)} '
            'in the config'
        ]
    changes = []
    for i, (state, scheduler) in enumerate(zip(saved, schedulers)):
        now = scheduler.state_dict()
        differ = [
            f'{key} {state[key]} -> {now[key]}'
            for key in LENGTH_KEYS
            if key in state and key in now and state[key] != now[key]
        ]
        if differ:
            name = type(scheduler).__name__
            changes.append(
                f'param_scheduler[{i}] ({name}): {", ".join(differ)}'
            )
    return changes


def _scheduled_values(optimizer, schedulers):
    names = sorted({s.param_name for s in schedulers})
    return {n: [g[n] for g in optimizer.param_groups] for n in names}


def _build_schedulers(runner):
    """The config's parameter schedulers for this run, built as the runner
    builds them (a FlexibleRunner through its strategy)."""
    config = runner.cfg.param_scheduler
    if hasattr(runner, 'build_param_scheduler'):
        return runner.build_param_scheduler(config)
    default_args = dict(
        epoch_length=len(runner.train_dataloader),
        max_epochs=runner.max_epochs,
        max_iters=runner.max_iters,
    )
    return runner.strategy.build_param_scheduler(
        config, runner.optim_wrapper, default_args
    )


def rebuild_schedule(runner, changes):
    """Rebuild ``runner.param_schedulers`` from the config for this run's
    length and advance them to ``runner.iter`` / ``runner.epoch`` exactly as
    ``ParamSchedulerHook`` steps them (iteration schedulers after every
    iteration, epoch schedulers after every epoch), starting from each
    parameter group's initial values; log what changed."""
    optimizer = runner.optim_wrapper.optimizer
    old = runner.param_schedulers
    before = _scheduled_values(optimizer, old)
    for group in optimizer.param_groups:
        for name in before:
            group[name] = group.get(f'initial_{name}', group[name])
    schedulers = _build_schedulers(runner)
    by_iter = [s for s in schedulers if not s.by_epoch]
    by_epoch = [s for s in schedulers if s.by_epoch]
    per_epoch = len(runner.train_dataloader) if by_epoch else None
    for done in range(1, runner.iter + 1):
        for scheduler in by_iter:
            scheduler.step()
        if per_epoch and done % per_epoch == 0:
            for scheduler in by_epoch:
                scheduler.step()
    runner.param_schedulers = schedulers
    after = _scheduled_values(optimizer, schedulers)
    values = '; '.join(
        f'{name} {before[name][0]:.4g} -> {after[name][0]:.4g}'
        for name in before
    )
    print_log(
        'The resumed checkpoint was trained for another training length '
        f'({"; ".join(changes)}): the parameter schedule is rebuilt from '
        f'the config for train_cfg ending at iteration {runner.max_iters} '
        f'and continues at iteration {runner.iter} as a run of that length '
        f'from the start would ({values} in the first parameter group).',
        logger='current',
        level=logging.WARNING,
    )


def finished_message(runner, checkpoint):
    """The line that says a resumed run has nothing left to train, or
    None."""
    if runner.iter < runner.max_iters:
        return None
    loop = runner.train_loop
    if hasattr(loop, 'max_epochs'):
        where = (
            f'epoch {runner.epoch} of train_cfg.max_epochs={loop.max_epochs}'
        )
        longer = 'train_cfg.max_epochs'
    else:
        where = (
            f'iteration {runner.iter} of train_cfg.max_iters={loop.max_iters}'
        )
        longer = 'train_cfg.max_iters'
    return (
        f'Nothing to train: {checkpoint} ends at {where}, so this run is '
        f'finished. To train longer, resume with a larger {longer} (the '
        'learning-rate schedule is rebuilt for the new length); to start '
        'a new run from these weights, pass --cfg-options '
        f'load_from={checkpoint} without --resume.'
    )
