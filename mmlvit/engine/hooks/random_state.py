"""Random number generator state in checkpoints, so that resuming is exact."""

import logging

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmpretrain.registry import HOOKS

from mmlvit.checkpoint.resume_state import check_resume_state
from mmlvit.engine.random_state import KEY, POSITION, capture, restore


@HOOKS.register_module()
class RandomStateHook(Hook):
    """Make a resumed run continue with the random numbers an uninterrupted
    run would have drawn.

    mmengine's checkpoints hold the seed but not the generators' states, so
    after ``--resume`` the data augmentation (e.g. ``RandomFlip``, which
    draws from numpy's global generator) and dropout draw different numbers
    than the uninterrupted run: the weights drift apart.

    The generators' states are taken when a training iteration and a
    training epoch end; a checkpoint carries the state of the point it was
    saved at, tagged with that point's ``epoch`` and ``iter``. A run resumed
    from an epoch checkpoint sets them when the next epoch begins, so
    anything that runs in between (validation, saving) draws without
    shifting training's numbers. A run resumed from a checkpoint saved
    within an epoch (iteration checkpoints, the checkpoint of a run stopped
    by a signal) sets them once the epoch's dataloader iterator exists,
    just before the next batch is loaded
    (:class:`~mmlvit.engine.runners.ResumableEpochBasedTrainLoop`). With
    ``randomness=dict(seed=..., deterministic=True)`` and ``num_workers=0``
    a resumed run ends bit-identical to the uninterrupted run on the same
    machine. Dataloader worker processes keep their own generators
    (mmengine seeds them from the seed, rank and worker id).
    """

    priority = 'HIGHEST'

    def __init__(self):
        self._epoch_end = None  # (epoch, iter, state) of the last epoch end
        self._iter_end = None  # (iter, state) of the last iteration end
        self._resume_point = None  # state to set within the resumed epoch

    def after_train_iter(
        self, runner, batch_idx, data_batch=None, outputs=None
    ):
        self._iter_end = (runner.iter + 1, capture())

    def after_train_epoch(self, runner):
        self._epoch_end = (runner.epoch + 1, runner.iter, capture())

    def before_train_epoch(self, runner):
        if self._epoch_end is not None and self._epoch_end[0] == runner.epoch:
            restore(self._epoch_end[2])

    def before_save_checkpoint(self, runner, checkpoint):
        meta = checkpoint.get('meta') or {}
        epoch, it = meta.get('epoch'), meta.get('iter')
        state = None
        if self._epoch_end is not None and self._epoch_end[:2] == (epoch, it):
            state = self._epoch_end[2]
        elif self._iter_end is not None and self._iter_end[0] == it:
            state = self._iter_end[1]
        if state is not None:
            checkpoint[KEY] = dict(epoch=epoch, iter=it, **state)
        batches = _epoch_length(runner)
        if batches and isinstance(epoch, int) and isinstance(it, int):
            checkpoint[POSITION] = dict(
                batch=it - epoch * batches, batches=batches
            )

    def after_load_checkpoint(self, runner, checkpoint):
        if not getattr(runner, '_resume', False):
            return
        check_resume_state(checkpoint, getattr(runner, '_load_from', None))
        if hasattr(runner.train_loop, 'saved_position'):
            runner.train_loop.saved_position = checkpoint.get(POSITION)
        saved = checkpoint.get(KEY)
        meta = checkpoint['meta']
        epoch, it = meta['epoch'], meta['iter']
        matches = (
            saved is not None
            and saved['epoch'] == epoch
            and saved.get('iter', it) == it
        )
        if matches:
            state = {
                k: v for k, v in saved.items() if k not in ('epoch', 'iter')
            }
            if it == _iters_through(runner, epoch):
                self._epoch_end = (epoch, it, state)
                return
            if hasattr(runner.train_loop, 'resume_position'):
                self._resume_point = state
                return
        print_log(
            'The resumed checkpoint holds no random-generator state for the '
            'point it was saved at (saved by a run without RandomStateHook, '
            'or within an epoch of a training loop that cannot resume '
            'there): training continues with fresh random numbers and will '
            'not match an uninterrupted run bit for bit.',
            logger='current',
            level=logging.WARNING,
        )

    def restore_resume_point(self, runner):
        """Set the generators to the state saved with the checkpoint this
        run resumed within an epoch (the training loop calls this just
        before the first batch of the resumed epoch is loaded)."""
        if self._resume_point is not None:
            restore(self._resume_point)
            self._resume_point = None


def _epoch_length(runner):
    """Batches per epoch of the training dataloader (None: no length)."""
    try:
        return len(runner.train_dataloader)
    except TypeError:
        return None


def _iters_through(runner, epoch):
    """Iterations after ``epoch`` full epochs of the training dataloader."""
    batches = _epoch_length(runner)
    return None if batches is None else epoch * batches
