"""Which checkpoint ``--resume`` without a path continues from: the newest
epoch or iteration checkpoint of the work directory that loads and holds
the training state (a sharded folder: one whose write finished)."""

import logging
import os
import os.path as osp
import re

from mmengine.logging import print_log

from .loading import CheckpointError, load_checkpoint_file
from .preemption import PREEMPTION_TEMPLATE
from .resume_state import malformed_resume_state, missing_resume_state
from .sharded import folder_problem


def resume_candidates(folder, filename_tmpl, by_epoch, epoch_length):
    """Epoch and iteration checkpoints (``filename_tmpl`` and
    ``iter_{N}.pth``) in ``folder``, newest first.

    Args:
        folder (str): The checkpoint folder.
        filename_tmpl (str): The hook's file name template.
        by_epoch (bool): Whether the template counts epochs.
        epoch_length (int | None): ``len(train_dataloader)``; None when the
            dataloader has no length.

    Returns:
        list[str]: Paths ordered by the iteration they were saved at (the
        epoch file first when both are at the same iteration; with an
        unknown epoch length, epoch files before iteration files).
    """
    per_epoch = epoch_length if by_epoch else 1
    templates = [(filename_tmpl, per_epoch, int(by_epoch))]
    if filename_tmpl != PREEMPTION_TEMPLATE:
        templates.append((PREEMPTION_TEMPLATE, 1, 0))
    steps = {}
    names = os.listdir(folder) if osp.isdir(folder) else []
    for template, scale, epoch_file in templates:
        pattern = re.compile(
            re.escape(template).replace(r'\{\}', r'(\d+)') + '$'
        )
        for name in names:
            match = pattern.match(name)
            if match is None:
                continue
            step = int(match.group(1))
            if scale is None:  # unknown length: epoch files first
                position = (float('inf'), step, 1)
            else:
                position = (step * scale, 0, epoch_file)
            steps[osp.join(folder, name)] = position
    return sorted(steps, key=steps.get, reverse=True)


def why_not_resumable(path):
    """Why the checkpoint file or sharded folder ``path`` cannot be
    resumed, or None when it can."""
    if osp.isdir(path):  # sharded (FSDP) checkpoint folder
        return folder_problem(path)
    try:
        checkpoint = load_checkpoint_file(path)
    except (CheckpointError, OSError) as err:
        return str(err)
    malformed = malformed_resume_state(checkpoint)
    if malformed:
        return '; '.join(malformed)
    missing = missing_resume_state(checkpoint)
    return f'no {", ".join(missing)}' if missing else None


def newest_resumable(folder, candidates):
    """The first of ``candidates`` that can be resumed, with a warning
    naming the newer ones skipped; None when ``folder`` has no checkpoint.

    Raises:
        CheckpointError: Checkpoints exist but none can be resumed (training
            would start over and overwrite them).
    """
    skipped = []
    for path in candidates:
        problem = why_not_resumable(path)
        if problem is None:
            break
        skipped.append(f'{path} ({problem})')
    else:
        if skipped:
            raise CheckpointError(
                f'--resume found checkpoints in {folder} but none can be '
                'resumed, so training would start over and overwrite '
                'them: ' + '; '.join(skipped) + '. Move them away to '
                'start a new run, or pass --resume PATH / load_from=PATH '
                'with a file that loads.'
            )
        return None
    if skipped:
        print_log(
            f'Resuming from {path}; skipped newer checkpoints that '
            'cannot be resumed: ' + '; '.join(skipped),
            logger='current',
            level=logging.WARNING,
        )
    return path
