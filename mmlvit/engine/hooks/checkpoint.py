"""mmengine's CheckpointHook made safe against kills during saving."""

import logging
import os
import os.path as osp
import re
from collections import deque
from contextlib import nullcontext

from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log
from mmpretrain.registry import HOOKS

from mmlvit.checkpoint import CheckpointError, load_checkpoint_file
from mmlvit.engine.atomic_files import atomic_write, leftover_temp_files
from mmlvit.engine.logs import FILE_CLIENT_DEPRECATION, drop_messages
from mmlvit.engine.resume_schedule import (
    finished_message,
    rebuild_schedule,
    schedule_changes,
)

LAST_CHECKPOINT = 'last_checkpoint'


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


def not_resumable_message(filename, missing):
    return (
        f'{filename} cannot be resumed: it holds no {", ".join(missing)} '
        '(best_*.pth files and weights-only checkpoints keep the model '
        'weights only, so the optimizer and the learning-rate schedule would '
        'silently start over). Resume from an epoch_*.pth/iter_*.pth file '
        'of the run, or start a new run from these weights with '
        f'--cfg-options load_from={filename} (without --resume).'
    )


@HOOKS.register_module()
class SafeCheckpointHook(CheckpointHook):
    """mmengine's :class:`~mmengine.hooks.CheckpointHook` for runs that can
    be killed at any moment.

    Takes the same arguments and saves the same files, with these changes:

    - Every file is complete or absent. Checkpoints and ``last_checkpoint``
      are written to a temporary file in the same folder and renamed
      (:mod:`mmlvit.engine.atomic_files`); temporary files of killed writes
      are removed at the next start.
    - Old checkpoints (``max_keep_ckpts``, the previous ``best_*.pth``) are
      deleted only after the new one is complete, so a kill in between
      never leaves nothing to resume.
    - Resuming with another training length (e.g. a larger
      ``train_cfg.max_epochs``) rebuilds the learning-rate schedule for the
      new length (:mod:`mmlvit.engine.resume_schedule`), with a warning;
      resuming a finished run logs that there is nothing to train.
    - Automatic resume (``--resume`` without a path) takes the newest
      checkpoint of the work directory that loads and holds the training
      state, with a warning naming any it skipped, instead of trusting
      ``last_checkpoint`` alone; it refuses to start over when checkpoints
      exist but none can be resumed. Resuming a file without optimizer
      state (a ``best_*.pth``, a weights-only file) is an error that points
      to ``load_from``.
    """

    def before_run(self, runner):
        folder = self._checkpoint_folder(runner)
        if is_main_process():
            for path in leftover_temp_files(folder):
                os.remove(path)
                print_log(
                    f'Removed {path}: a checkpoint write that was killed '
                    'before it finished.',
                    logger='current',
                    level=logging.WARNING,
                )
        if runner._resume and runner._load_from is None:
            resume_from = self._newest_resumable(folder)
            if resume_from is not None:
                runner._load_from = resume_from

    def _unused_file_client(self):
        """Without ``file_client_args`` mmengine still builds a
        ``FileClient`` (before training and at every save) that it does not
        use, and warns that ``FileClient`` is deprecated: drop that
        warning."""
        if self.file_client_args is not None:
            return nullcontext()
        return drop_messages(*FILE_CLIENT_DEPRECATION)

    def before_train(self, runner):
        with self._unused_file_client():
            super().before_train(runner)
        resumed, self._resumed = getattr(self, '_resumed', None), None
        if resumed is None:
            return
        filename, changes = resumed
        if changes:
            rebuild_schedule(runner, changes)
        finished = finished_message(runner, filename)
        if finished:
            print_log(finished, logger='current')

    def after_load_checkpoint(self, runner, checkpoint):
        # Runner.resume() reads meta['epoch'] and the optimizer right after
        # this call: a file without them fails there with a bare KeyError
        # or, for best_*.pth, silently restarts the schedule.
        if getattr(runner, '_resume', False) and not getattr(
            runner, '_has_loaded', True
        ):
            missing = missing_resume_state(checkpoint)
            if missing:
                raise CheckpointError(
                    not_resumable_message(runner._load_from, missing)
                )
            # The runner's schedulers are still those built for this run's
            # length; the checkpoint's state replaces them next.
            self._resumed = (
                runner._load_from,
                schedule_changes(
                    checkpoint.get('param_schedulers'),
                    runner.param_schedulers,
                ),
            )

    def _checkpoint_folder(self, runner):
        """The folder checkpoints go to (``before_train`` sets ``out_dir``
        the same way)."""
        if self.out_dir is None or self.out_dir == runner.work_dir:
            return runner.work_dir
        return osp.join(
            self.out_dir, osp.basename(runner.work_dir.rstrip(osp.sep))
        )

    def _candidates(self, folder):
        """Step checkpoints (``filename_tmpl``) in ``folder``, newest
        first."""
        pattern = re.compile(
            re.escape(self.filename_tmpl).replace(r'\{\}', r'(\d+)') + '$'
        )
        steps = []
        for name in os.listdir(folder) if osp.isdir(folder) else []:
            match = pattern.match(name)
            if match:
                steps.append((int(match.group(1)), osp.join(folder, name)))
        return [path for _, path in sorted(steps, reverse=True)]

    def _newest_resumable(self, folder):
        candidates = self._candidates(folder)
        skipped = []
        for path in candidates:
            if osp.isdir(path):  # sharded (FSDP/DeepSpeed) checkpoint folder
                chosen = path
                break
            try:
                missing = missing_resume_state(load_checkpoint_file(path))
            except (CheckpointError, OSError) as err:
                skipped.append(f'{path} ({err})')
                continue
            if missing:
                skipped.append(f'{path} (no {", ".join(missing)})')
                continue
            chosen = path
            break
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
                f'Resuming from {chosen}; skipped newer checkpoints that '
                'cannot be resumed: ' + '; '.join(skipped),
                logger='current',
                level=logging.WARNING,
            )
        return chosen

    def _save_checkpoint_with_step(self, runner, step, meta):
        """mmengine's order is: delete the oldest kept checkpoint, save the
        new one, write ``last_checkpoint``. Here the deletion comes last,
        and ``last_checkpoint`` is written atomically."""
        outdated = []
        if self.max_keep_ckpts > 0:
            # Until they are deleted, outdated steps stay in the list that
            # the checkpoint records: a run resumed after a kill between
            # saving and deleting deletes them (CheckpointHook.before_train).
            kept = list(self.keep_ckpt_ids)
            if not kept or kept[-1] != step:
                kept.append(step)
            outdated = kept[: -self.max_keep_ckpts]
            runner.message_hub.update_info('keep_ckpt_ids', kept)

        ckpt_filename = self.filename_tmpl.format(step)
        self.last_ckpt = self.file_backend.join_path(
            self.out_dir, ckpt_filename
        )
        runner.message_hub.update_info('last_ckpt', self.last_ckpt)
        with self._unused_file_client():
            runner.save_checkpoint(
                self.out_dir,
                ckpt_filename,
                self.file_client_args,
                save_optimizer=self.save_optimizer,
                save_param_scheduler=self.save_param_scheduler,
                meta=meta,
                by_epoch=self.by_epoch,
                backend_args=self.backend_args,
                **self.args,
            )
        if is_main_process():
            atomic_write(
                osp.join(runner.work_dir, LAST_CHECKPOINT), self.last_ckpt
            )
            for old_step in outdated:
                self._remove(
                    self.file_backend.join_path(
                        self.out_dir, self.filename_tmpl.format(old_step)
                    )
                )
        if self.max_keep_ckpts > 0:
            self.keep_ckpt_ids = deque(kept, self.max_keep_ckpts)
            runner.message_hub.update_info(
                'keep_ckpt_ids', list(self.keep_ckpt_ids)
            )

    def _save_best_checkpoint(self, runner, metrics):
        """mmengine deletes the previous best checkpoint before it saves the
        new one; here the deletion waits until the new one is complete."""
        backend = self.file_backend
        self.file_backend = _DeferredRemoval(backend)
        try:
            with self._unused_file_client():
                super()._save_best_checkpoint(runner, metrics)
        finally:
            deferred, self.file_backend = self.file_backend, backend
        current = {self.last_ckpt, getattr(self, 'best_ckpt_path', None)}
        current |= set(getattr(self, 'best_ckpt_path_dict', {}).values())
        for path in deferred.paths:
            if path not in current:
                self._remove(path)

    def _remove(self, path):
        if self.file_backend.isfile(path):
            self.file_backend.remove(path)
        elif self.file_backend.isdir(path):  # sharded checkpoint folder
            self.file_backend.rmtree(path)


class _DeferredRemoval:
    """A file backend whose ``remove``/``rmtree`` only note the path."""

    def __init__(self, backend):
        self._backend = backend
        self.paths = []

    def remove(self, path):
        self.paths.append(path)

    rmtree = remove

    def __getattr__(self, name):
        return getattr(self._backend, name)
