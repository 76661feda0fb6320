"""The epoch-based training loop that resumes in the middle of an epoch.

mmengine's ``EpochBasedTrainLoop`` restarts a resumed epoch from its first
batch, whatever the checkpoint's iteration: a run resumed from a checkpoint
saved within an epoch (an iteration checkpoint, or the one saved when the
run is stopped by SIGTERM/SIGUSR1) trains the epoch's first batches twice
and ends after more iterations than the uninterrupted run.

:class:`ResumableEpochBasedTrainLoop` continues with the batch after the
checkpoint's: the position in the epoch is ``meta.iter - meta.epoch *
len(train_dataloader)``, and the sampler (mmengine's ``DefaultSampler``
draws the order of an epoch from the seed and the epoch alone) skips the
samples already trained without loading them. The random generators are
then set to their state at the checkpoint
(:class:`~mmlvit.engine.hooks.RandomStateHook`), so that with
``num_workers=0`` and a deterministic run the resumed run ends bit-identical
to the uninterrupted one. :class:`mmlvit.engine.runners.Runner` builds this
loop for every ``train_cfg`` with ``by_epoch=True``.
"""

import itertools
import logging

from mmengine.logging import print_log
from mmengine.registry import LOOPS
from mmengine.runner import EpochBasedTrainLoop


class _SkipFirst:
    """A sampler that leaves out the first ``count`` indices of another one
    and keeps its length (so that ``len(dataloader)``, the logs' ``[i/N]``
    and the ETA stay those of the whole epoch)."""

    def __init__(self, sampler, count):
        self.sampler, self.count = sampler, count

    def __iter__(self):
        return itertools.islice(iter(self.sampler), self.count, None)

    def __len__(self):
        return len(self.sampler)


@LOOPS.register_module()
class ResumableEpochBasedTrainLoop(EpochBasedTrainLoop):
    """``EpochBasedTrainLoop`` whose first epoch after a resume starts at
    the batch after the checkpoint's instead of the epoch's first batch
    (see the module docstring). Uninterrupted runs are unchanged."""

    _position_taken = False
    # The resumed checkpoint's place in its epoch (set by RandomStateHook):
    # dict(batch=trained batches of the epoch, batches=batches per epoch).
    saved_position = None

    def resume_position(self):
        """Batches of the current epoch that the resumed checkpoint has
        already trained (0 at an epoch boundary)."""
        batches = len(self.dataloader)
        saved = self.saved_position
        if saved is None:  # a checkpoint without its position
            done = self._iter - self._epoch * batches
            return done if 0 < done <= batches else 0
        if saved['batches'] != batches:
            if saved['batch']:
                print_log(
                    f'The resumed checkpoint was saved after batch '
                    f'{saved["batch"]} of {saved["batches"]} of epoch '
                    f'{self._epoch + 1}, but an epoch now has {batches} '
                    'batches (another batch size or dataset): the epoch '
                    'starts over from its first batch.',
                    logger='current',
                    level=logging.WARNING,
                )
            return 0
        return saved['batch']

    def run_epoch(self):
        self.runner.call_hook('before_train_epoch')
        self.runner.model.train()
        start = 0
        if not self._position_taken:
            self._position_taken = True
            start = self.resume_position()
        batches = self._batches_from(start) if start else self.dataloader
        for idx, data_batch in enumerate(batches, start):
            self.run_iter(idx, data_batch)
        self.runner.call_hook('after_train_epoch')
        self._epoch += 1

    def _batches_from(self, start):
        """The epoch's batches from index ``start`` on; the random
        generators are set to the checkpoint's state before the first one
        is loaded."""
        batch_sampler = getattr(self.dataloader, 'batch_sampler', None)
        sampler = getattr(batch_sampler, 'sampler', None)
        batch_size = getattr(batch_sampler, 'batch_size', None)
        print_log(
            f'Resuming within epoch {self._epoch + 1}: continuing with batch '
            f'{start + 1} of {len(self.dataloader)} (iteration '
            f'{self._iter + 1}).',
            logger='current',
        )
        if sampler is None or not isinstance(batch_size, int):
            # A custom batch sampler: load the trained batches and drop them.
            iterator = iter(self.dataloader)
            for _ in range(start):
                next(iterator)
            self._restore_random_state()
            yield from iterator
            return
        batch_sampler.sampler = _SkipFirst(sampler, start * batch_size)
        try:
            # The iterator draws its base seed from torch's generator when
            # it is created, as the uninterrupted run's did at the start of
            # the epoch: the saved state already includes that draw.
            iterator = iter(self.dataloader)
            self._restore_random_state()
            yield from iterator
        finally:
            batch_sampler.sampler = sampler

    def _restore_random_state(self):
        for hook in self.runner.hooks:
            restore = getattr(hook, 'restore_resume_point', None)
            if restore is not None:
                restore(self.runner)
