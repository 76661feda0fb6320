"""A warning before training when the learning-rate schedule cannot work at
the run's real length (iterations per epoch come from the data, so configs
cannot be checked for this before the Runner builds its dataloader)."""

from mmengine.hooks import Hook


def lr_schedulers(param_schedulers):
    """The learning-rate schedulers of a runner (a list, or a dict of lists
    per optimizer), in order."""
    if isinstance(param_schedulers, dict):
        groups = list(param_schedulers.values())
    else:
        groups = [param_schedulers or []]
    return [
        s
        for group in groups
        for s in group
        if getattr(s, 'param_name', None) == 'lr'
    ]


def schedule_warnings(schedulers, iterations, per_epoch):
    """Why the learning rate would not do its job in a run of
    ``iterations`` iterations, ``per_epoch`` to an epoch: a warm-up that
    ends after the run (the rate never reaches its base value), or a decay
    that covers a single iteration (the rate drops to its floor at once).

    Returns:
        list[str]: One message each, naming the fix.
    """

    def steps(s, value):
        return value * per_epoch if s.by_epoch else value

    messages = []
    for i, s in enumerate(schedulers):
        name = f'param_scheduler[{i}] ({type(s).__name__})'
        begin, end = steps(s, s.begin), steps(s, s.end)
        if getattr(s, 'start_factor', 1) < 1 and begin == 0:
            if end > iterations:
                messages.append(
                    f'{name} warms the learning rate up until iteration '
                    f'{end}, but this run has {iterations} iterations '
                    f'({per_epoch} per epoch): the learning rate never '
                    'reaches its base value. Shorten the warm-up (its '
                    '`end`, or by_epoch=True to count epochs), or train '
                    'longer (train_cfg, a larger batch count per epoch).'
                )
        elif begin < iterations and min(end, iterations) - begin == 1:
            messages.append(
                f'{name} covers one iteration ({begin}) of this '
                f'{iterations}-iteration run ({per_epoch} per epoch): the '
                'learning rate drops to its final value at once. Train for '
                'more iterations (train_cfg, a smaller batch or a larger '
                'train set) or give the schedule fewer, longer phases.'
            )
    return messages


class LearningRateScheduleCheckHook(Hook):
    """Logs :func:`schedule_warnings` before training.
    :class:`mmlvit.engine.runners.Runner` adds it to every run."""

    priority = 'LOWEST'

    def before_train(self, runner):
        per_epoch = len(runner.train_dataloader)
        schedulers = lr_schedulers(runner.param_schedulers)
        for message in schedule_warnings(
            schedulers, runner.max_iters, per_epoch
        ):
            runner.logger.warning(message)
