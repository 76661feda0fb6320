"""The random generators that training draws from, captured and set
again, so that a resumed run draws the numbers an uninterrupted run would
have (:class:`~mmlvit.engine.hooks.RandomStateHook` stores them in
checkpoints)."""

import random

import numpy as np
import torch

KEY = 'random_state'
# Where in its epoch a checkpoint was saved: dict(batch=trained batches of
# the epoch, batches=batches per epoch then).
POSITION = 'epoch_position'


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
