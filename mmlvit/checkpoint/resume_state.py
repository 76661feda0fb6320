"""What ``--resume`` needs of a checkpoint: the training state (epoch,
iteration, optimizer) and well-formed metadata, checked before anything of
the file is applied."""

import numpy as np
import torch

from .loading import CheckpointError


def missing_resume_state(checkpoint):
    """What a checkpoint lacks to continue training: the names of the
    missing parts (``meta.epoch``, ``meta.iter``, ``optimizer``); empty when
    it can be resumed."""
    meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    missing = [f'meta.{key}' for key in ('epoch', 'iter') if key not in meta]
    if not isinstance(checkpoint, dict) or 'optimizer' not in checkpoint:
        missing.append('optimizer')
    return missing


def _show(value):
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + '...'
    return f'{text} ({type(value).__name__})'


def _is_count(value):
    return (
        isinstance(value, (int, np.integer))
        and not isinstance(value, (bool, np.bool_))
        and value >= 0
    )


def malformed_resume_state(checkpoint):
    """Fields of a checkpoint that ``Runner.resume`` and the hooks read and
    that hold something else than what mmengine writes there: one phrase
    per field (``meta.epoch is 'abc' (a str), not ...``); empty when every
    field present is well-formed (missing fields:
    :func:`missing_resume_state`)."""
    if not isinstance(checkpoint, dict):
        return [f'the file holds {_show(checkpoint)}, not a checkpoint dict']
    if 'meta' not in checkpoint:
        return []
    meta = checkpoint['meta']
    if not isinstance(meta, dict):
        return [f'meta is {_show(meta)}, not a dict']
    problems = [
        f'meta.{key} is {_show(meta[key])}, not a non-negative integer'
        for key in ('epoch', 'iter')
        if key in meta and not _is_count(meta[key])
    ]
    if (
        not problems
        and {'epoch', 'iter'} <= meta.keys()
        and meta['iter'] < meta['epoch']
    ):
        problems.append(
            f'meta.iter ({meta["iter"]}) is smaller than meta.epoch '
            f'({meta["epoch"]}), but every epoch has at least one iteration'
        )
    seed = meta.get('seed')
    if seed is not None and not isinstance(seed, (int, np.integer)):
        problems.append(f'meta.seed is {_show(seed)}, not an integer')
    if 'config' in meta and not isinstance(meta['config'], str):
        problems.append(f'meta.config is {_show(meta["config"])}, not a str')
    position = checkpoint.get('epoch_position')
    if position is not None and not (
        isinstance(position, dict)
        and all(_is_count(position.get(k)) for k in ('batch', 'batches'))
        and position['batch'] <= position['batches']
    ):
        problems.append(
            f'epoch_position is {_show(position)}, not dict(batch=B, '
            'batches=N) with 0 <= B <= N'
        )
    saved = checkpoint.get('random_state')
    if saved is not None:
        if not isinstance(saved, dict):
            problems.append(f'random_state is {_show(saved)}, not a dict')
        else:
            problems += [
                f'random_state.{key} is {_show(saved.get(key))}, not a '
                'non-negative integer'
                for key in ('epoch', 'iter')
                if (key in saved or key == 'epoch')
                and not _is_count(saved.get(key))
            ]
            problems += [
                f'random_state.{key} is missing'
                for key in ('python', 'numpy', 'torch')
                if key not in saved
            ]
            if 'torch' in saved and not isinstance(
                saved['torch'], torch.Tensor
            ):
                problems.append(
                    f'random_state.torch is {_show(saved["torch"])}, not a '
                    'tensor'
                )
    return problems


def malformed_message(filename, problems):
    return (
        f'{filename} cannot be resumed: {"; ".join(problems)}. The file was '
        'not written by this training code or was edited. Resume from '
        'another checkpoint of the run (--resume without a path takes the '
        'newest one that is intact), or start a new run from its weights '
        f'with --cfg-options load_from={filename} (without --resume).'
    )


def check_resume_state(checkpoint, filename):
    """Raise :class:`CheckpointError` naming ``filename`` and the field
    when ``checkpoint`` lacks the training state or holds malformed
    metadata; nothing of it has been applied yet when this is called
    (``after_load_checkpoint``)."""
    problems = malformed_resume_state(checkpoint)
    if problems:
        raise CheckpointError(malformed_message(filename, problems))
    missing = missing_resume_state(checkpoint)
    if missing:
        raise CheckpointError(not_resumable_message(filename, missing))


def not_resumable_message(filename, missing):
    return (
        f'{filename} cannot be resumed: it holds no {", ".join(missing)} '
        '(best_*.pth files and weights-only checkpoints keep the model '
        'weights only, so the optimizer and the learning-rate schedule would '
        'silently start over). Resume from an epoch_*.pth/iter_*.pth file '
        'of the run, or start a new run from these weights with '
        f'--cfg-options load_from={filename} (without --resume).'
    )
