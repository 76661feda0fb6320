"""Random number generator state in checkpoints, so that resuming is exact."""

import logging
import random

import numpy as np
import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmpretrain.registry import HOOKS

KEY = 'random_state'


def capture():
    """The state of every generator data augmentation and training draw
    from: Python's, numpy's global one, torch's CPU and CUDA ones."""
    state = dict(
        python=random.getstate(),
        numpy=np.random.get_state(),
        torch=torch.get_rng_state(),
    )
    if torch.cuda.is_available():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def restore(state):
    """Set the generators to a :func:`capture` result."""
    random.setstate(_as_python_state(state['python']))
    np.random.set_state(state['numpy'])
    torch.set_rng_state(state['torch'])
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state['cuda'])


def _as_python_state(state):
    """``random.setstate`` wants tuples; a checkpoint may give lists."""
    version, internal, gauss = state
    return version, tuple(internal), gauss


@HOOKS.register_module()
class RandomStateHook(Hook):
    """Make a resumed run continue with the random numbers an uninterrupted
    run would have drawn.

    mmengine's checkpoints hold the seed but not the generators' states, so
    after ``--resume`` the data augmentation (e.g. ``RandomFlip``, which
    draws from numpy's global generator) and dropout draw different numbers
    than the uninterrupted run: the weights drift apart.

    The generators' states are taken when a training epoch ends and set
    again when the next one begins, so anything that runs in between
    (validation, saving) draws without shifting training's numbers. Every
    checkpoint saved after an epoch carries that epoch's state, and the
    first epoch of a resumed run starts from it. With
    ``randomness=dict(seed=..., deterministic=True)`` a run resumed from an
    epoch checkpoint ends bit-identical to the uninterrupted run on the same
    machine. Not covered: a run resumed from a checkpoint saved within an
    epoch (iteration-based checkpoints) continues with fresh random numbers
    (a warning says so), and dataloader worker processes keep their own
    generators (mmengine seeds them from the seed, rank and worker id).
    """

    priority = 'HIGHEST'

    def __init__(self):
        self._epoch_end = None  # (epoch, state) of the last finished epoch

    def after_train_epoch(self, runner):
        self._epoch_end = (runner.epoch + 1, capture())

    def before_train_epoch(self, runner):
        if self._epoch_end is not None and self._epoch_end[0] == runner.epoch:
            restore(self._epoch_end[1])

    def before_save_checkpoint(self, runner, checkpoint):
        if self._epoch_end is not None:
            epoch, state = self._epoch_end
            checkpoint[KEY] = dict(epoch=epoch, **state)

    def after_load_checkpoint(self, runner, checkpoint):
        if not getattr(runner, '_resume', False):
            return
        saved = checkpoint.get(KEY)
        meta = checkpoint.get('meta', {})
        at_epoch_end = (
            saved is not None
            and saved['epoch'] == meta.get('epoch')
            and meta.get('iter') == _iters_through(runner, saved['epoch'])
        )
        if at_epoch_end:
            state = {k: v for k, v in saved.items() if k != 'epoch'}
            self._epoch_end = (saved['epoch'], state)
            return
        print_log(
            'The resumed checkpoint holds no random-generator state for the '
            'point it was saved at (saved within an epoch, or by a run '
            'without RandomStateHook): training continues with fresh random '
            'numbers and will not match an uninterrupted run bit for bit.',
            logger='current',
            level=logging.WARNING,
        )


def _iters_through(runner, epoch):
    """Iterations after ``epoch`` full epochs of the training dataloader."""
    try:
        return epoch * len(runner.train_dataloader)
    except TypeError:  # a dataloader without a length
        return None
